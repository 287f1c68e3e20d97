// Recipes (YAML, recipes/recipe.h and recipes/program.h): any text parses to a recipe or to
// located problems, and a recipe that parses can be shown, signed and its graph analysed; a
// program recipe (the text names `program`) that parses is shown as YAML that parses back to
// the same signature, and its command expands for a candidate's values.
#include <cstdint>
#include <string>
#include <string_view>

#include "recipes/model/graph.h"
#include "recipes/program.h"
#include "recipes/recipe.h"

#include "fuzz/fuzz_check.h"

namespace {

void program_recipe(std::string_view text) {
  using namespace dltune::recipes;
  const ProgramParseOutcome out = parse_program_recipe(text, "fuzz.yaml", "/nonexistent-fuzz-dir");
  for (const Problem& p : out.problems) (void)p.to_string();
  if (!out.ok()) return;
  const std::string sig = program_signature(out.recipe);
  FUZZ_CHECK(sig.size() == 64);
  const std::string yaml = program_recipe_to_yaml(out.recipe);
  const ProgramParseOutcome again =
      parse_program_recipe(yaml, "shown.yaml", "/nonexistent-fuzz-dir");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(program_signature(again.recipe) == sig);
  ProgramValues v;
  v.batch = 32, v.steps = 10, v.threads_per_rank = 2, v.ranks_per_node = 2, v.ranks = 4;
  v.bucket_mb = 4;
  (void)program_command(out.recipe, v);  // an error for an unset placeholder, never a crash
  (void)program_env(out.recipe, v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dltune::recipes;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (names_program(text)) {
    program_recipe(text);
    return 0;
  }
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
