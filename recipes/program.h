// A program recipe: a recipe that names the user's own training program (a PyTorch DDP script,
// an mpi4py or C MPI code) instead of a model, and what of it dltune may tune (issue 39).
//
//   name: my-ddp
//   program:
//     command: [python3, train.py, --batch-size, "{batch}", --steps, "{steps}"]
//     env: {MY_BUCKET: "{bucket_mb}"}                      # optional, placeholders allowed
//     throughput: {pattern: 'samples/s: ([0-9.]+)'}        # or {metrics: samples_per_s}
//     steps: 200              # {steps} of the final run (default 100)
//     trial_steps: 20         # {steps} of a first-round trial (default 20)
//     trial_timeout: 120      # seconds a trial may run before it is stopped and fails
//   tune:
//     budget: 120
//     search:
//       batch: [32, 64, 128]          # {batch}: the per-rank batch
//       threads_per_rank: auto        # OMP_NUM_THREADS (and OpenBLAS's, MKL's) and the binding
//       ranks_per_node: auto
//       bucket_mb: [1, 4, 25]         # {bucket_mb} and DLTUNE_BUCKET_MB
//   launch: {ranks: auto, binding: core}
//
// Placeholders, in `command` and `env` values: {batch} (per-rank batch), {global_batch} (batch
// x ranks), {steps}, {threads} (threads per rank), {ranks}, {ranks_per_node}, {bucket_mb};
// `{{` and `}}` stand for a literal brace. A placeholder of a setting the search does not vary
// and the recipe does not fix ({batch} without search.batch) is a problem. The program is told
// its trial's length through {steps}, DLTUNE_TRIAL_STEPS and DLTUNE_TRIAL_SECONDS; it reports
// its throughput (samples per second over the whole job) either by printing a line the
// pattern matches on rank 0's standard output (its one capture group the number; the last
// match counts) or by appending JSON lines to the file $DLTUNE_METRICS names, the last line
// with the `metrics` key counting.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "recipes/recipe.h"

namespace dltune::recipes {

// Where a program's throughput comes from: exactly one of the two is set.
struct ProgramThroughput {
  std::string pattern;      // ECMAScript regex with one capture group, matched per line
  std::string metrics_key;  // the key of JSON lines in $DLTUNE_METRICS ("samples_per_s")
};

// What the tuner may vary. An empty list is a setting the search leaves alone (the recipe's
// launch section, or the program's own default); `*_auto` asks dltune to choose the values.
struct ProgramSearch {
  std::vector<int64_t> batch;             // per-rank batches, each >= 1
  std::vector<int64_t> threads_per_rank;  // each >= 1
  bool threads_auto = false;              // threads_per_rank: auto
  std::vector<int64_t> ranks_per_node;    // each >= 1
  bool ranks_auto = false;                // ranks_per_node: auto
  std::vector<double> bucket_mb;          // each > 0
};

inline constexpr int64_t kProgramDefaultSteps = 100;
inline constexpr int64_t kProgramDefaultTrialSteps = 20;
inline constexpr double kProgramDefaultTrialTimeoutS = 120;
inline constexpr double kProgramDefaultBudgetS = 120;

struct ProgramRecipe {
  std::string name;         // `name`, default: the file name without .yaml
  std::string description;  // "" when absent
  std::string source_path;  // the file it came from ("" when parsed from text)
  std::string source_dir;   // its directory: the program runs there, relative paths resolve there
  std::vector<std::string> command;  // as written, placeholders included; command[0] the program
  std::vector<std::pair<std::string, std::string>> env;  // NAME -> value with placeholders
  ProgramThroughput throughput;
  int64_t steps = kProgramDefaultSteps;             // the final run's {steps}
  int64_t trial_steps = kProgramDefaultTrialSteps;  // a first-round trial's {steps}
  double trial_timeout_s = kProgramDefaultTrialTimeoutS;
  double budget_seconds = kProgramDefaultBudgetS;  // tune.budget; 0 = do not tune
  // tune.screening: "auto" (the model-assisted search, tuner/program_tuning.h) or "off" (every
  // candidate measured in the first round, no racing). Not part of the signature.
  std::string screening = "auto";
  ProgramSearch search;
  // launch.ranks, ranks_per_node, threads_per_rank, binding (none | core | numa | auto), the
  // restarts keys; the model-only keys (memory_per_rank, baseline) are problems here.
  LaunchConfig launch;
};

// One candidate's values, what the placeholders are replaced with. 0 = not set (its
// placeholder is not allowed, and nothing is exported for it).
struct ProgramValues {
  int64_t batch = 0;
  int64_t steps = 0;
  int threads_per_rank = 0;
  int ranks_per_node = 0;
  int ranks = 0;  // the job's ranks: ranks_per_node x nodes
  double bucket_mb = 0;
};

// Whether YAML text is a program recipe: a mapping with a top-level `program` key (looked at
// without a full parse, so that every command can send a program recipe to its own parser).
// False for text that is not YAML.
bool names_program(std::string_view yaml_text);

struct ProgramParseOutcome {
  ProgramRecipe recipe;           // meaningful only when problems is empty
  std::vector<Problem> problems;  // sorted by line, then column
  bool ok() const { return problems.empty(); }
};

// Parses and validates a program recipe, reporting every problem at once, located as the
// model recipe parser does (`file:line:col: key: what is wrong`): unknown keys (with "did you
// mean"), `model`/`data`/`training`/`comm` beside `program`, an empty command, neither or both
// of throughput.pattern / metrics, a pattern that is not a regex or has no capture group, an
// unknown placeholder, a placeholder of a setting neither searched nor fixed, empty or
// non-positive search lists, ranks_per_node searched while launch.ranks is fixed, threads x
// ranks per node listed as both lists and auto. Never throws.
ProgramParseOutcome parse_program_recipe(std::string_view yaml_text, const std::string& file,
                                         const std::string& base_dir);
// Reads the file and parses it; an unreadable file is one problem without a location.
ProgramParseOutcome parse_program_recipe_file(const std::string& path);
// Resolves (resolve_recipe_path), parses and validates. Error (invalid_input): every problem,
// one per line.
Result<ProgramRecipe> load_program_recipe(const std::string& path_or_name);

// `text` with its placeholders replaced by `values`. Error (invalid_input): an unknown
// placeholder, one whose value is not set (0), or an unmatched brace, naming it.
Result<std::string> expand_placeholders(std::string_view text, const ProgramValues& values);
// The command and the environment of one run of the program with `values`: every element
// expanded. The environment also carries DLTUNE_BUCKET_MB (when bucket_mb is set) and
// DLTUNE_BATCH (when batch is set). Errors: as expand_placeholders().
Result<std::vector<std::string>> program_command(const ProgramRecipe& recipe,
                                                 const ProgramValues& values);
Result<std::vector<std::pair<std::string, std::string>>> program_env(const ProgramRecipe& recipe,
                                                                     const ProgramValues& values);

// The tuning key's recipe part for a program: the SHA-256 (64 hex digits, as the database's key
// requires) of a canonical text that starts with its own version line, over everything a tuned
// plan depends on: the command and env as written, the throughput source, the search space,
// the launch keys the search does not vary (ranks, threads, binding), and the contents of the
// files the command names (each argument that is a readable regular file relative to
// source_dir, up to 64 MiB each), so that an edited train.py is tuned again. Not the name,
// description, steps, trial_steps, trial_timeout or budget.
std::string program_signature(const ProgramRecipe& recipe);

// The recipe as YAML, every default filled in (`dltune recipe show`, and the run directory's
// recipe.yaml).
std::string program_recipe_to_yaml(const ProgramRecipe& recipe);

}  // namespace dltune::recipes
