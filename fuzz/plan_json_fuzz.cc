// Plans (JSON, recipes/plan.h) as the database, a bundle or DLTUNE_PLAN hand them over: any
// text is a plan or an error; a plan round-trips exactly, has a rule for every size and no
// control character in its text. Then served to a recipe as a launch serves a cached plan
// (recipes/plan_fit.h: the recipe's fixed settings written over it, checked against the
// recipe): a plan that passes never scales the lr beyond the recipe's linear rule.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/strings.h"
#include "recipes/plan.h"
#include "recipes/plan_fit.h"
#include "recipes/recipe.h"

#include "fuzz/fuzz_check.h"

namespace {

// The quickstart's optimizer (lr meant for a global batch of 128, auto rule), per-rank 64.
const dltune::recipes::Recipe& served_recipe() {
  static const dltune::recipes::Recipe recipe = [] {
    auto o = dltune::recipes::parse_recipe(
        "name: q\nmodel: lenet\ndata: {kind: synthetic-digits, samples: 20000}\n"
        "training:\n  steps: 300\n  batch: {per_rank: 64}\n"
        "  optimizer: {lr: 0.02, lr_reference_batch: 128}\n",
        "q.yaml", "/nonexistent-fuzz-dir");
    FUZZ_CHECK(o.ok());
    return o.recipe;
  }();
  return recipe;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dltune::recipes;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto plan = parse_plan(text);
  if (!plan) return 0;
  for (const std::string* s : {&plan->provenance.reason, &plan->provenance.recipe,
                               &plan->provenance.budget_cut, &plan->parallel.reason}) {
    FUZZ_CHECK(dltune::strings::find_control(*s) == std::string::npos);
  }
  const bool plausible = check_plan_plausible(*plan).ok();
  auto again = parse_plan(serialize_plan(*plan));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *plan);
  for (const auto& [c, ranges] : plan->collectives) {
    for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, kPlanMaxBytes}) {
      FUZZ_CHECK(plan->algorithm_for(c, bytes).has_value());
    }
  }
  if (!plausible) return 0;
  const int64_t ranks = int64_t{plan->job.nodes} * plan->job.ranks_per_node;
  Plan served = *plan;
  (void)apply_fixed_settings(served_recipe(), ranks, &served);
  if (!validate_plan(served).ok() || !check_plan_lr_scale(served_recipe(), ranks, served).ok()) {
    return 0;
  }
  const double linear = static_cast<double>(served.training.global_batch) / 128.0;
  FUZZ_CHECK(served.training.lr_scale <= std::max(1.0, linear) * (1 + 1e-6));
  return 0;
}
