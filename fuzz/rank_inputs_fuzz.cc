// What a training rank parses before it trains: the Plan (JSON, the job data or the file
// DLTUNE_PLAN names) and the recipe as run (YAML, the run directory's recipe.yaml). The input is
// the plan's text, a line "---8<---", then the recipe's text. Any pair is refused or taken;
// beyond not crashing, a taken pair holds what a rank relies on:
//   - the recipe's fixed settings written over the plan (recipes::apply_fixed_settings) stay
//     written: applying them again changes nothing and says nothing;
//   - the plan's pipeline cut (parallel.partition) either names cut points of the recipe's
//     graph, one per stage, in order, each making a stage of its own, or is refused.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recipes/model/graph.h"
#include "recipes/model/partition.h"
#include "recipes/plan.h"
#include "recipes/plan_fit.h"
#include "recipes/recipe.h"

#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dltune::recipes;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kCut = "\n---8<---\n";
  const size_t at = all.find(kCut);
  if (at == std::string_view::npos) return 0;
  auto plan = parse_plan(all.substr(0, at));
  // A run directory that does not exist: data paths resolve to nothing readable.
  const ParseOutcome recipe =
      parse_recipe(all.substr(at + kCut.size()), "run/recipe.yaml", "/nonexistent-fuzz-run");
  if (!plan || !recipe.ok()) return 0;
  const int64_t ranks = plan->parallel.replicas * plan->parallel.stages;
  (void)apply_fixed_settings(recipe.recipe, ranks, &*plan);
  Plan again = *plan;
  FUZZ_CHECK(apply_fixed_settings(recipe.recipe, ranks, &again).empty());
  FUZZ_CHECK(again == *plan);
  const Graph& graph = recipe.recipe.model.graph;
  const GraphInfo info = analyze_graph(graph);
  if (!info.ok() || plan->parallel.stages <= 1) return 0;
  auto firsts = partition_nodes(graph, info, plan->parallel.partition);
  if (!firsts) return 0;
  FUZZ_CHECK(firsts->size() == plan->parallel.partition.size());
  const int n = static_cast<int>(graph.nodes.size());
  for (size_t s = 0; s < firsts->size(); ++s) {
    const int begin = (*firsts)[s];
    const int end = s + 1 < firsts->size() ? (*firsts)[s + 1] : n;
    FUZZ_CHECK(begin < end);
    FUZZ_CHECK(make_stage(graph, info, begin, end).ok());
  }
  return 0;
}
