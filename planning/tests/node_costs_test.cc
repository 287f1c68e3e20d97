// The node costs' JSON (what `dltune-worker profile --fit` writes and the launcher reads): the
// writer's output reads back as it was, and every malformed answer is refused naming its key.
#include "planning/node_costs.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace dltune::planning {
namespace {

NodeCosts sample() {
  NodeCosts c;
  c.per_sample = {1e-4, 2.5e-5, 0};
  c.per_call = {3e-6, 0, 1e-7};
  c.optimizer_per_parameter = 2e-9;
  c.small_batch = 4;
  c.large_batch = 32;
  return c;
}

TEST(NodeCosts, WhatIsWrittenReadsBack) {
  const NodeCosts c = sample();
  auto back = parse_node_costs(node_costs_to_json(c).dump());
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->per_sample, c.per_sample);
  EXPECT_EQ(back->per_call, c.per_call);
  EXPECT_EQ(back->optimizer_per_parameter, c.optimizer_per_parameter);
  EXPECT_EQ(back->small_batch, 4);
  EXPECT_EQ(back->large_batch, 32);
}

TEST(NodeCosts, MalformedAnswersAreRefusedNamingTheKey) {
  struct Case {
    const char* key;
    nlohmann::json value;  // null: the key removed
    const char* says;
  };
  for (const Case& k :
       {Case{"per_sample", nullptr, "'per_sample'"}, Case{"per_sample", "x", "'per_sample'"},
        Case{"per_sample", {1e-4, -1.0, 0.0}, "'per_sample'"},
        Case{"per_call", {1.0}, "'per_call' has 1 entries"},
        Case{"optimizer_per_parameter", "fast", "'optimizer_per_parameter'"},
        Case{"small_batch", 0, "'small_batch'"}, Case{"small_batch", 64, "above 'large_batch'"},
        Case{"large_batch", 2.5, "'large_batch'"}}) {
    SCOPED_TRACE(std::string(k.key) + " = " + k.value.dump());
    nlohmann::json j = node_costs_to_json(sample());
    if (k.value.is_null())
      j.erase(k.key);
    else
      j[k.key] = k.value;
    auto r = node_costs_from_json(j);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().exit_code(), 2);
    EXPECT_NE(r.error().message().find(k.says), std::string::npos) << r.error().message();
  }
  EXPECT_FALSE(parse_node_costs("[1, 2]").ok());
  EXPECT_FALSE(parse_node_costs("{not json").ok());
}

}  // namespace
}  // namespace dltune::planning
