// The step-time model's view of a built-in model, for predict/'s tests.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "planning/model_costs.h"
#include "recipes/model/builtins.h"

namespace dltune::predict::test_models {

// planning::model_costs of the built-in model `name` (a test failure when it has none).
inline planning::ModelCosts builtin_costs(const std::string& name) {
  auto g = recipes::builtin_graph(name, {});
  EXPECT_TRUE(g.has_value()) << name;
  auto c = planning::model_costs(*g, name);
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message());
  return *c;
}

}  // namespace dltune::predict::test_models
