// The Recipe: what to train and how (recipes/README.md documents every key).
//
// A recipe is a YAML file. parse_recipe*() turn it into this plain struct and report EVERY
// problem at once, each located as `file:line:col: key.path: what is wrong, what is allowed`.
// Values the user left out carry their documented defaults; `auto` choices are kept as such
// (0 / nullopt / kAuto) for the tuner to decide.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "recipes/enums.h"
#include "recipes/model.h"

namespace dltune::recipes {

struct ModelConfig {
  std::string builtin;            // built-in architecture name, "" when given as a layer list
  std::vector<LayerSpec> layers;  // always filled: a built-in is expanded here
  Shape input;                    // per-sample input shape, = the data's shape
  std::string dtype = "f32";      // element type; "f32" is the only one today
};

enum class DataKind { kSyntheticDigits, kSyntheticImagenet, kMnist, kCifar10 };
std::string_view data_kind_name(DataKind kind);  // "synthetic-digits", "mnist", ...

struct DataConfig {
  DataKind kind = DataKind::kSyntheticDigits;
  std::string path;      // mnist / cifar10: absolute directory of the files; "" for synthetic
  Shape shape;           // per-sample shape: 1x28x28 (digits, mnist), 3x32x32 (cifar10), 3x224x224
  int64_t classes = 10;  // 10, or synthetic-imagenet's `classes` (default 1000)
  int64_t samples = 0;   // synthetic: training samples generated (0 for file data)
  double heldout_fraction = 0.1;    // share of the training samples held out for accuracy
  bool heldout_test_files = false;  // mnist / cifar10 with `heldout: test`: use the test files
};

enum class ScheduleKind { kConstant, kStep, kCosine };
std::string_view schedule_kind_name(ScheduleKind kind);

struct OptimizerConfig {
  std::string kind = "sgd";  // "sgd" (with momentum) is the only one today
  double lr = 0.01;          // base learning rate, for the reference global batch
  double momentum = 0.9;
  double weight_decay = 0.0;
  // The global batch `lr` is meant for; other global batches scale lr by `lr_scaling`'s rule.
  // 0 = the recipe's own global batch.
  int64_t lr_reference_batch = 0;
  LrScaling lr_scaling = LrScaling::kAuto;
};

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::kConstant;
  int64_t warmup_steps = 0;  // linear warmup from 0 to lr over these steps
  int64_t step_size = 0;     // step: multiply lr by gamma every step_size steps
  double gamma = 0.1;        // step: the factor
  double min_lr = 0.0;       // cosine: the floor reached at the last step
};

struct TrainingConfig {
  int64_t epochs = 0;  // exactly one of epochs / steps is > 0
  int64_t steps = 0;
  // Batch: per_rank_batch > 0 (weak scaling's unit) or global_batch > 0 (strong), or both 0 =
  // `auto` (the tuner chooses). max_global_batch 0 = no limit.
  int64_t per_rank_batch = 0;
  int64_t global_batch = 0;
  int64_t max_global_batch = 0;
  Scaling scaling = Scaling::kAuto;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  int64_t checkpoint_every = 0;  // steps between checkpoints; 0 = only at the end
  uint64_t seed = 1;
};

enum class Overlap { kAuto, kOn, kOff };

struct CommConfig {
  std::string backend = "auto";        // auto | mpi | thread | nccl
  std::optional<Algorithm> allreduce;  // nullopt = auto (tuned)
  uint64_t bucket_bytes = 0;           // 0 = auto (tuned)
  Overlap overlap = Overlap::kAuto;
};

enum class Objective { kThroughput, kTimeToAccuracy };

struct TuneConfig {
  double budget_seconds = 60;  // wall time the tuner may spend; 0 = do not tune (defaults)
  Objective objective = Objective::kThroughput;
  double target_accuracy = 0.0;  // time-to-accuracy: the held-out accuracy to reach, (0, 1]
};

struct LaunchConfig {
  int64_t ranks = 0;             // 0 = auto (one per GPU, else one per NUMA domain)
  int64_t ranks_per_node = 0;    // 0 = auto
  std::string binding = "auto";  // none | core | numa | auto
};

struct Recipe {
  std::string name;         // `name`, default: the file name without .yaml
  std::string description;  // free text, "" when absent
  std::string source_path;  // the file it came from, as given ("" when parsed from text)
  std::string source_dir;   // its directory: relative data paths are resolved against it
  ModelConfig model;
  DataConfig data;
  TrainingConfig training;
  CommConfig comm;
  TuneConfig tune;
  LaunchConfig launch;
};

// One problem found in a recipe. line/column are 1-based; 0 when unknown (a value set in code).
struct Problem {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key;  // the key path: "training.batch.per_rank", "model.layers[2].conv2d.kernel"
  std::string message;
  // "file:line:col: key: message" (or "file: key: message" without a location).
  std::string to_string() const;
};

// Where each key path was found in the file (filled by the parser, read by validation).
using SourceMap = std::map<std::string, std::pair<int, int>>;

struct ParseOutcome {
  Recipe recipe;                  // meaningful only when problems is empty
  std::vector<Problem> problems;  // sorted by line, then column
  bool ok() const { return problems.empty(); }
};

// Parses and validates YAML text. `file` names it in problems; relative data paths resolve
// against `base_dir`. Never throws; every problem (syntax, type, unknown key, impossible
// combination, missing data file) is in the outcome.
ParseOutcome parse_recipe(std::string_view yaml_text, const std::string& file,
                          const std::string& base_dir);
// Reads `path` and parses it; an unreadable file is one problem with no location.
ParseOutcome parse_recipe_file(const std::string& path);

// Cross-field checks on a recipe (batch vs ranks, shapes, data files, schedule vs steps).
// Call it again after changing a parsed recipe (e.g. `-n` overriding launch.ranks). `where`
// locates keys in the file; without it problems carry no line/column.
std::vector<Problem> validate_recipe(const Recipe& recipe, const SourceMap* where = nullptr);

// Resolves a recipe argument: an existing file path as is, else a bundled recipe's name
// (find_bundled_recipe). Error (not_found): "no recipe file or bundled recipe named 'x'
// (bundled: quickstart, ...)", with a "did you mean" for a near miss.
Result<std::string> resolve_recipe_path(const std::string& path_or_name);
// Resolves, parses and validates. Error (invalid_input): every problem, one per line.
Result<Recipe> load_recipe(const std::string& path_or_name);

// The SHA-256 (64 hex characters) of everything a tuned plan depends on (the tuning key's
// recipe part): model layers, dtype, input shape and class count; the data (kind, samples,
// held-out share); the training settings (length, batch, scaling, optimizer, schedule); the
// communication settings (backend, allreduce, bucket, overlap); the tuning objective. Not the
// name, description, paths, seed, checkpoint interval, tune.budget or launch section (the job
// shape is a key field of its own).
std::string recipe_signature(const Recipe& recipe);
// The recipe as normalised JSON (every default filled in), for `dltune recipe show`.
std::string recipe_to_json(const Recipe& recipe);

// Bundled recipes: the *.yaml files in recipes/ of the installed share directory
// (<exe>/../share/dltune/recipes), then DLTUNE_SOURCE_DIR/recipes, then ./recipes.
struct BundledRecipe {
  std::string name;  // file name without .yaml
  std::string path;
  std::string description;  // the recipe's `description`, "" when it has none
};
// Path of the bundled recipe `name`; not_found when no searched directory has <name>.yaml.
Result<std::string> find_bundled_recipe(const std::string& name);
// Every bundled recipe in the first directory that has any, sorted by name.
std::vector<BundledRecipe> list_bundled_recipes();

}  // namespace dltune::recipes
