// The Plan: JSON round trip in the agreed shape, validation on load, rule lookup.
#include "recipes/plan.h"

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace dltune::recipes {
namespace {

using nlohmann::json;

// The example of the agreed shape (plan.h), verbatim.
const char* kExample = R"({
  "version": 1,
  "collectives": {
    "allreduce": [ {"min_bytes": 0, "max_bytes": 4096, "algo": "rd", "segment_bytes": 0},
                   {"min_bytes": 4096, "max_bytes": 18446744073709551615, "algo": "ring",
                    "segment_bytes": 1048576} ],
    "broadcast": [ {"min_bytes": 0, "max_bytes": 18446744073709551615, "algo": "tree",
                    "segment_bytes": 0} ] },
  "training": {"per_rank_batch": 64, "global_batch": 128, "scaling": "weak",
               "lr_scale": 2.0, "warmup_steps": 100, "bucket_bytes": 4194304, "overlap": true},
  "placement": [ {"local_rank": 0, "cpus": [0], "gpu": -1, "nic": ""},
                 {"local_rank": 1, "cpus": [1], "gpu": -1, "nic": ""} ],
  "job": {"nodes": 1, "ranks_per_node": 2},
  "parallel": {"replicas": 2, "stages": 1, "partition": [], "microbatches": 1,
               "schedule": "1f1b", "recompute": "none", "reason": "", "memory_bytes": 0,
               "predicted_sps": 0.0, "measured_sps": 0.0},
  "provenance": {"source": "tuned", "reason": "rd below 4 KiB, ring above",
                 "predicted_sps": 1500.0, "measured_sps": 1432.5}
})";

TEST(PlanJson, ReadsTheAgreedShape) {
  auto plan = parse_plan(kExample);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  const auto& ar = plan->collectives.at(Collective::kAllreduce);
  ASSERT_EQ(ar.size(), 2u);
  EXPECT_EQ(ar[0].algo, Algorithm::kRecursiveDoubling);
  EXPECT_EQ(ar[1].max_bytes, kPlanMaxBytes);
  EXPECT_EQ(ar[1].segment_bytes, 1048576u);
  EXPECT_EQ(plan->training.global_batch, 128);
  EXPECT_EQ(plan->training.scaling, Scaling::kWeak);
  EXPECT_DOUBLE_EQ(plan->training.lr_scale, 2.0);
  EXPECT_TRUE(plan->training.overlap);
  ASSERT_EQ(plan->placement.size(), 2u);
  EXPECT_EQ(plan->placement[1].cpus, std::vector<int>{1});
  EXPECT_EQ(plan->job.ranks_per_node, 2);
  EXPECT_EQ(plan->provenance.source, PlanSource::kTuned);
  EXPECT_DOUBLE_EQ(plan->provenance.measured_sps, 1432.5);
}

TEST(PlanJson, RoundTripsExactly) {
  auto plan = parse_plan(kExample);
  ASSERT_TRUE(plan.ok());
  auto again = parse_plan(serialize_plan(*plan));
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(*plan, *again);
  EXPECT_EQ(plan_to_json(*plan), json::parse(kExample));
}

// A plan written before layouts existed is data parallel over every rank; a pipeline layout
// must cover the job and name a first node per stage.
TEST(PlanJson, LayoutsDefaultToDataParallelAndAreChecked) {
  json j = json::parse(kExample);
  j.erase("parallel");
  auto old = plan_from_json(j);
  ASSERT_TRUE(old.ok()) << old.error().message();
  EXPECT_EQ(old->parallel.replicas, 2);
  EXPECT_EQ(old->parallel.stages, 1);
  j = json::parse(kExample);
  j["parallel"]["replicas"] = 1;
  j["parallel"]["stages"] = 2;
  j["parallel"]["partition"] = {"conv1", "layer2.0.conv1"};
  j["parallel"]["microbatches"] = 8;
  j["parallel"]["schedule"] = "async";
  j["training"]["global_batch"] = 64;  // one replica
  auto pipe = plan_from_json(j);
  ASSERT_TRUE(pipe.ok()) << pipe.error().message();
  EXPECT_EQ(pipe->parallel.schedule, PipelineSchedule::kAsync);
  EXPECT_TRUE(pipe->parallel.pipelined());
  EXPECT_EQ(pipe->parallel.offload, Offload::kNone);  // absent: none
  EXPECT_FALSE(plan_to_json(*pipe)["parallel"].contains("offload"));
  json off = j;
  off["parallel"]["offload"] = "optimizer";
  auto offloaded = plan_from_json(off);
  ASSERT_TRUE(offloaded.ok()) << offloaded.error().message();
  EXPECT_EQ(offloaded->parallel.offload, Offload::kOptimizer);
  EXPECT_EQ(plan_to_json(*offloaded)["parallel"]["offload"], "optimizer");
  EXPECT_FALSE(same_layout(offloaded->parallel, pipe->parallel));
  struct Bad {
    const char* key;
    json value;
    const char* message;
  };
  for (const Bad& b : {Bad{"stages", 3, "must equal the job's 2 ranks"},
                       Bad{"partition", json::array({"conv1"}), "one per stage"},
                       Bad{"microbatches", 65, "in 1..per_rank_batch"},
                       Bad{"schedule", "zigzag", "expected gpipe, 1f1b or async"},
                       Bad{"offload", "params", "expected none or optimizer"}}) {
    json k = j;
    k["parallel"][b.key] = b.value;
    auto r = plan_from_json(k);
    ASSERT_FALSE(r.ok()) << b.key;
    EXPECT_NE(r.error().message().find(b.message), std::string::npos) << r.error().message();
  }
}

TEST(PlanLookup, PicksTheRangeHoldingTheSize) {
  auto plan = parse_plan(kExample);
  ASSERT_TRUE(plan.ok());
  struct Case {
    uint64_t bytes;
    Algorithm algo;
  };
  for (const Case& c : {Case{0, Algorithm::kRecursiveDoubling},
                        Case{4095, Algorithm::kRecursiveDoubling}, Case{4096, Algorithm::kRing},
                        Case{1u << 30, Algorithm::kRing}, Case{kPlanMaxBytes, Algorithm::kRing}}) {
    auto rule = plan->algorithm_for(Collective::kAllreduce, c.bytes);
    ASSERT_TRUE(rule.has_value()) << c.bytes;
    EXPECT_EQ(rule->algo, c.algo) << c.bytes;
  }
  EXPECT_EQ(plan->algorithm_for(Collective::kBroadcast, 10)->algo, Algorithm::kTree);
  EXPECT_FALSE(plan->algorithm_for(Collective::kAllgather, 10).has_value());
}

// Each mutation of the example must be rejected with a message containing `want`.
struct BadCase {
  const char* what;
  std::function<void(json&)> mutate;
  const char* want;
};

TEST(PlanJson, RejectsBadPlansWithClearErrors) {
  const std::vector<BadCase> cases = {
      {"wrong version", [](json& j) { j["version"] = 2; },
       "version: this dltune reads plan version 1, got 2"},
      {"unknown algorithm", [](json& j) { j["collectives"]["allreduce"][1]["algo"] = "rign"; },
       "collectives.allreduce[1].algo: unknown algorithm 'rign'"},
      {"overlap", [](json& j) { j["collectives"]["allreduce"][1]["min_bytes"] = 2048; },
       "min_bytes 2048 must equal the previous range's max_bytes 4096 (ranges overlap)"},
      {"gap", [](json& j) { j["collectives"]["allreduce"][1]["min_bytes"] = 8192; },
       "(ranges leave a gap)"},
      {"unsorted",
       [](json& j) {
         auto& a = j["collectives"]["allreduce"];
         std::swap(a[0], a[1]);
       },
       "collectives.allreduce[0]: the first range must start at min_bytes 0"},
      {"not covering", [](json& j) { j["collectives"]["allreduce"][1]["max_bytes"] = 65536; },
       "the last range must end at max_bytes 18446744073709551615"},
      {"empty range", [](json& j) { j["collectives"]["allreduce"][0]["max_bytes"] = 0; },
       "min_bytes 0 must be below max_bytes 0"},
      {"no ranges", [](json& j) { j["collectives"]["broadcast"] = json::array(); },
       "collectives.broadcast: has no size ranges"},
      {"unknown collective", [](json& j) { j["collectives"]["alltoall"] = json::array(); },
       "collectives.alltoall: unknown collective"},
      {"negative bytes", [](json& j) { j["collectives"]["allreduce"][0]["max_bytes"] = -1; },
       "collectives.allreduce[0].max_bytes: expected a non-negative integer, got -1"},
      {"unknown key", [](json& j) { j["training"]["batch"] = 5; }, "training.batch: unknown key"},
      {"missing key", [](json& j) { j.erase("job"); }, "job: missing"},
      {"auto scaling", [](json& j) { j["training"]["scaling"] = "auto"; },
       "training.scaling: expected weak or strong, got 'auto'"},
      {"batch mismatch", [](json& j) { j["training"]["global_batch"] = 100; },
       "training.global_batch: 100 must equal per_rank_batch 64 x 2 ranks"},
      {"placement count",
       [](json& j) {
         j["job"]["ranks_per_node"] = 4;
         j["training"]["global_batch"] = 256;
       },
       "placement: has 2 entries but job.ranks_per_node is 4"},
      {"duplicate local rank", [](json& j) { j["placement"][1]["local_rank"] = 0; },
       "placement[1].local_rank: 0 must be unique"},
      {"bad source", [](json& j) { j["provenance"]["source"] = "guess"; },
       "provenance.source: expected tuned, cache or default, got 'guess'"},
      {"wrong type", [](json& j) { j["training"]["overlap"] = "yes"; },
       "training.overlap: expected true or false, got string"},
      {"not an object", [](json& j) { j = json::array(); }, "expected an object, got array"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    json j = json::parse(kExample);
    c.mutate(j);
    auto plan = plan_from_json(j);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.error().exit_code(), 2);
    EXPECT_NE(plan.error().message().find(c.want), std::string::npos) << plan.error().message();
  }
}

TEST(PlanJson, RejectsTextThatIsNotJson) {
  for (const char* text : {"", "{", "{\"version\": 1,}", "nope"}) {
    auto plan = parse_plan(text);
    ASSERT_FALSE(plan.ok()) << text;
    EXPECT_NE(plan.error().message().find("not valid JSON"), std::string::npos);
  }
}

TEST(PlanDefault, IsValidAndCoversEverySize) {
  const Plan plan = default_plan(2, 4, 32, Algorithm::kRing);
  ASSERT_TRUE(validate_plan(plan).ok()) << validate_plan(plan).error().message();
  EXPECT_EQ(plan.training.global_batch, 256);
  EXPECT_EQ(plan.provenance.source, PlanSource::kDefault);
  EXPECT_EQ(plan.algorithm_for(Collective::kAllreduce, 12345)->algo, Algorithm::kRing);
  auto again = parse_plan(serialize_plan(plan));
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(*again, plan);
}

TEST(PlanNames, AlgorithmNamesRoundTrip) {
  for (const std::string& name : algorithm_names()) {
    auto a = parse_algorithm(name);
    ASSERT_TRUE(a.has_value()) << name;
    EXPECT_EQ(algorithm_name(*a), name);
  }
  EXPECT_FALSE(parse_algorithm("Ring").has_value());
  EXPECT_EQ(algorithm_name(Algorithm::kRecursiveDoubling), "rd");
}

}  // namespace
}  // namespace dltune::recipes
