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
#include "recipes/model/builtins.h"

namespace dltune::recipes {

// How the recipe gave its model: a built-in name, a `layers:` chain or a `nodes:` graph.
enum class ModelForm { kBuiltin, kLayers, kNodes };

struct ModelConfig {
  ModelForm form = ModelForm::kBuiltin;
  std::string builtin;        // built-in architecture name, "" for layers / nodes
  BuiltinOptions options;     // the built-in's settings the recipe gave (GPT: blocks, width, ...)
  std::vector<Node> nodes;    // layers / nodes as written (unnamed layers named "<op><k>")
  Shape input;                // per-sample input shape, = the data's shape
  std::string dtype = "f32";  // element type; "f32" is the only one today
  // The network to run, always filled after parsing: the built-in expanded for the data's
  // input and classes, or the chain / nodes on the input.
  Graph graph;
};

enum class DataKind {
  kSyntheticDigits,
  kSyntheticImagenet,
  kMnist,
  kCifar10,
  kSyntheticCifar,
  kText,
  kImageFolder,  // folders of JPEG / PNG images per class (recipes/data_layout.h)
  kTokens        // llm.c's pre-tokenized GPT-2 shards (recipes/data_layout.h)
};
std::string_view data_kind_name(DataKind kind);  // "synthetic-digits", "mnist", ...

// Text data (byte-level language modelling): a sample is `context` bytes starting every
// text_window_stride(context) bytes of the file's training part (its first 1 - heldout share;
// the held-out part is the rest), labelled with the next byte at each position.
int64_t text_window_stride(int64_t context);
// The bytes of a `bytes`-long file in its held-out part.
int64_t text_heldout_bytes(int64_t bytes, double heldout_fraction);
// Samples in `part_bytes` bytes (0 when shorter than one window of context + 1 bytes).
int64_t text_windows(int64_t part_bytes, int64_t context);

struct DataConfig {
  DataKind kind = DataKind::kSyntheticDigits;
  // mnist / cifar10 / imagefolder: absolute directory of the files; text: the absolute file;
  // tokens: an absolute glob of shards; "" for synthetic
  std::string path;
  // Per-sample shape: 1x28x28 (digits, mnist), 3x32x32 (cifar10, synthetic-cifar), 3x224x224;
  // imagefolder: 3 x size x size; text: (context) byte ids; tokens: (context) token ids.
  Shape shape;
  // 10, synthetic-imagenet's `classes` (default 1000); imagefolder: its class folders; text:
  // 256 (every byte value), the vocabulary of the next-byte prediction at every position;
  // tokens: GPT-2's vocabulary, 50257.
  int64_t classes = 10;
  // text: bytes per sample; tokens: tokens per sample (the model sees `context`, predicts the
  // next).
  int64_t context = 0;
  int64_t samples = 0;            // synthetic: training samples generated (0 for file data)
  double heldout_fraction = 0.1;  // share of the training samples held out for accuracy
  // The dataset's own held-out files: mnist / cifar10 with `heldout: test` (the test files),
  // imagefolder's DIR/val, tokens' last shard (`heldout: val`, the default where they exist).
  bool heldout_test_files = false;
};

enum class ScheduleKind { kConstant, kStep, kCosine };
std::string_view schedule_kind_name(ScheduleKind kind);

struct OptimizerConfig {
  std::string kind = "sgd";  // "sgd" (with momentum) or "adamw" (decoupled weight decay)
  double lr = 0.01;          // base learning rate, for the reference global batch
  double momentum = 0.9;     // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw
  double clip_grad_norm = 0.0;  // > 0: scale the gradient to at most this global L2 norm
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

// How the model is laid over the ranks (training.parallel): data parallelism, a pipeline of
// stages, or both (replicas of a pipeline); `auto` lets the tuner choose from the memory model
// and measurements. Every field 0 / "auto" is the tuner's to decide.
struct ParallelConfig {
  std::string mode = "auto";       // auto | data | pipeline | hybrid
  int64_t stages = 0;              // 0 = auto
  int64_t microbatches = 0;        // 0 = auto
  std::string schedule = "auto";   // auto | gpipe | 1f1b | async
  std::string recompute = "auto";  // auto | none | stage
  // auto | none | optimizer: the GPU engine keeps the optimizer state in pinned host memory and
  // streams it through the device for the update (engine/gpu/offload.h); auto offloads only
  // where the layout would not fit the device otherwise. CPU runs never offload.
  std::string offload = "auto";
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
  int64_t checkpoint_every = 0;  // steps between checkpoints; 0 = a quarter of the run
  // Seconds between checkpoints as well (the first step after each interval), 0 = none.
  double checkpoint_every_seconds = 0;
  uint64_t seed = 1;
  std::string init_from;  // absolute path of a safetensors file to start from; "" = seeded init
  ParallelConfig parallel;
  // fp32 | bf16 (bf16 compute, fp32 master weights: engine/core/precision.h) | auto (bf16 where
  // the CPU has bf16 instructions, else fp32).
  std::string precision = "fp32";
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
  // A run continued on another shape (a restart on fewer ranks, `--resume -n`) whose new shape
  // has no cached plan is tuned this long first; 0 = the recipe's own settings. Not part of the
  // tuning key.
  double restart_budget_seconds = 5;
  Objective objective = Objective::kThroughput;
  double target_accuracy = 0.0;  // time-to-accuracy: the held-out accuracy to reach, (0, 1]
};

struct LaunchConfig {
  int64_t ranks = 0;           // 0 = auto (one per GPU, else one per NUMA domain)
  int64_t ranks_per_node = 0;  // 0 = auto
  // Threads each rank computes on; 0 = auto: the cores of its binding (every core of the node
  // shared among its ranks; 1 for a GPU rank, whose work is the device's).
  int64_t threads_per_rank = 0;
  std::string binding = "auto";  // none | core | numa | auto
  // Memory a rank may use, bytes; 0 = auto: its share of the node's memory as the cgroup
  // allows, or of its GPU's. The tuner never launches a layout that does not fit it.
  uint64_t memory_per_rank = 0;
  // The scaling efficiency's 1-rank baseline, run after a multi-rank job: auto (the user
  // database's when this machine measured the same work before, else measured for at most about
  // 10 % of the training's time and stored), measure (measured and stored even when one is
  // stored) or off (no baseline, no efficiency).
  std::string baseline = "auto";
  // How many times a failed job continues by itself from the run's last checkpoint (a rank
  // that exited, was killed or hung past the communication timeout), on the same ranks; 0 =
  // never (the launch stops and says how to --resume). Not part of the tuning key.
  int64_t restarts = 0;
  // The fewest ranks a failed job may continue on: a failure that comes again before the
  // restarted job trains a step is taken as lasting, and the next restart runs on fewer ranks
  // (planned again, the global batch kept), down to this many. 0 = the job's own ranks (never
  // fewer). Not part of the tuning key.
  int64_t min_ranks = 0;
  // Under Slurm, the fewest nodes a failed job may continue on: when the failed rank's node no
  // longer answers, the next restart leaves it out and runs on the allocation's other nodes
  // (the same ranks per node, planned again, the global batch kept), down to this many. 0 =
  // the job's own nodes (never fewer). Not part of the tuning key.
  int64_t min_nodes = 0;
  // Under Slurm, nodes held beyond the job's to take a lost node's place: the restart runs on
  // a spare with the same shape, plan and global batch, as after a rank's failure. dltune asks
  // salloc for this many more nodes when it obtains the allocation; inside one, the job's
  // default node count is the allocation's less these (any node of the allocation the job does
  // not run on serves as a spare). Not part of the tuning key.
  int64_t spare_nodes = 0;
};
// The most restarts a recipe may ask for.
inline constexpr int64_t kMaxRestarts = 100;

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
// Parses and validates YAML text (a recipe as run, handed to a rank), as parse_recipe() does.
// Error (invalid_input): every problem, one per line.
Result<Recipe> load_recipe_text(std::string_view yaml_text, const std::string& file,
                                const std::string& base_dir);

// The SHA-256 (64 hex characters) of everything a tuned plan depends on (the tuning key's
// recipe part): model layers, dtype, input shape and class count; the data (kind, samples,
// held-out share); the training settings (batch, scaling, optimizer but its learning rate,
// schedule; the length only under the time-to-accuracy objective); the communication settings
// (backend, allreduce, bucket, overlap); the tuning objective. Not the name, description, paths,
// seed, the run's length under the throughput objective (a plan is reused for a shorter or longer
// run: the launch says so), checkpoint and evaluation schedule, tune.budget or launch section (the
// job shape is a key field of its own).
std::string recipe_signature(const Recipe& recipe);
// The recipe normalised (every default filled in, only the keys that apply to it, no
// placeholders), for `dltune recipe show`: as JSON (the model's whole node table included), and
// as YAML in the order a recipe file lists its keys (a built-in's node table left to `dltune
// model show`).
std::string recipe_to_json(const Recipe& recipe);
std::string recipe_to_yaml(const Recipe& recipe);

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
