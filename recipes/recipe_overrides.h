// `dltune launch RECIPE --set KEY=VALUE ...`: changes to a recipe from the command line.
//
// An override replaces the value at a dotted key path of the recipe's YAML document before the
// document is parsed, so that the value is checked exactly as the file's own values are (type,
// range, unknown keys with "did you mean", cross-field checks). Problems in an overridden value
// name the override instead of a file position:
//   --set training.steps=many: training.steps: expected a positive integer, got "many"
// The recipe as run (the file's document with the overrides applied, data paths made absolute
// so that it reads the same files from any directory) is what the run directory records.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "recipes/recipe.h"

namespace dltune::recipes {

struct Override {
  std::string key;    // "training.steps": mapping keys joined by '.'
  std::string value;  // YAML text of the value: "10", "[3, 64, 64]", "{per_rank: 64}", "sgd"
  std::string text;   // as given: "training.steps=10"
};

// Parses "KEY=VALUE". Errors (invalid_input): no '=', an empty key or value, a key part that
// is empty or holds characters other than letters, digits, '_' and '-', or a value that is not
// YAML. The message starts with "--set 'TEXT': ".
Result<Override> parse_override(std::string_view text);

// The recipe file (or bundled name) `path_or_name` resolved, read and parsed with `overrides`
// applied in order. Setting a key below a shorthand scalar expands it first: `data: mnist`
// becomes {kind: mnist}, `model: lenet` {builtin: lenet}, `training.schedule: cosine`
// {kind: cosine}, `training.batch: auto` {}. Other keys missing on the way are created as
// mappings. Setting training.steps removes the file's training.epochs, and setting
// training.epochs its training.steps (a run's length is given one way). A run that
// training.steps makes shorter than the file's step counts fit (checkpoint_every above it,
// schedule.warmup_steps or step_size at or above it) keeps each such count, unless an override
// sets it, at the share of the run it had in the file (100 of 300 steps -> 13 of 40), or, when
// the file gives epochs, at a default share (checkpoints a quarter, warm-up 5 %, step decay
// half); one line in `notes` (optional) says what changed. Problems: those of the file, with an
// override's own problems named by it (see above); an override below a value that is not a
// mapping is one problem naming it.
ParseOutcome parse_recipe_with_overrides(const std::string& path, const std::vector<Override>& o,
                                         std::vector<std::string>* notes = nullptr);

// Resolves, parses with overrides and validates, as load_recipe() does; `notes` as above.
// Error (invalid_input): every problem, one per line; not_found as resolve_recipe_path().
Result<Recipe> load_recipe_with_overrides(const std::string& path_or_name,
                                          const std::vector<Override>& overrides,
                                          std::vector<std::string>* notes = nullptr);

// The YAML text of the recipe at `path` with `overrides` applied (and fitted to the run's length
// as parse_recipe_with_overrides() fits it), as a run directory records it:
// a comment naming the source file and the overrides, then the document; data.path and
// training.init_from are written as the absolute paths `recipe` resolved them to. Errors: the
// file cannot be read or is not YAML (parse it first to get located problems).
Result<std::string> recipe_yaml_as_run(const std::string& path, const Recipe& recipe,
                                       const std::vector<Override>& overrides);

}  // namespace dltune::recipes
