// Recipes (YAML, recipes/recipe.h): any text parses to a recipe or to located problems, and a
// recipe that parses can be shown, signed and its graph analysed.
#include <cstdint>
#include <string>
#include <string_view>

#include "recipes/model/graph.h"
#include "recipes/recipe.h"

#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dltune::recipes;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // A base directory that does not exist: data paths resolve to nothing readable.
  const ParseOutcome out = parse_recipe(text, "fuzz.yaml", "/nonexistent-fuzz-dir");
  for (const Problem& p : out.problems) (void)p.to_string();
  if (!out.ok()) return 0;
  const std::string json = recipe_to_json(out.recipe);  // threw on invalid UTF-8 once
  FUZZ_CHECK(!json.empty());
  FUZZ_CHECK(recipe_signature(out.recipe).size() == 64);
  const GraphInfo info = analyze_graph(out.recipe.model.graph);
  FUZZ_CHECK(info.parameters >= 0);  // a class count of 2^63-1 once made it negative
  return 0;
}
