// TrainConfig: everything a rank needs to train, as plain data in the engine's own terms.
//
// A rank builds it from the recipe as run and the Plan of its job (train_config_from in
// engine/train/recipe_config.h: the one mapping, also the tuner's trials'); it never crosses a
// process boundary (the Plan does). Tests and benchmarks that drive the engine directly fill it
// in code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "recipes/enums.h"
#include "recipes/model/graph.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::engine {

// The plan's scaling mode (kStrong or kWeak; never kAuto in a configuration).
using Scaling = recipes::Scaling;

// Messages of at most max_bytes use `algorithm` (one comm/ runs on host memory; on the GPU
// engine NCCL picks per call). Ranges are sorted by max_bytes; the last one also covers larger.
struct AlgorithmRange {
  uint64_t max_bytes = UINT64_MAX;
  Algorithm algorithm = Algorithm::kRing;
  // The ring's pipelining segment in bytes (the plan's ring/SEGMENT choice); 0: comm's default
  // (comm::AllreduceOptions::segment_bytes). Only the ring uses it (hier: its ring among nodes).
  uint64_t segment_bytes = 0;
};

struct TrainConfig {
  // A built-in model name (recipes/model/builtins.h), or (with `graph`) the name a model from a
  // recipe goes by (checkpoints record it).
  std::string model = "lenet";
  // The network: JSON "graph" in recipes/model/graph.h's form. Empty (no nodes) = the built-in
  // `model` for `input` and `classes`.
  recipes::Graph graph;
  recipes::Shape input;  // a built-in's input ([C, H, W], [N], text: [T]); empty = its default
  int classes = 0;       // a built-in's classes (text: the vocabulary); 0 = its default
  // synthetic | synthetic-imagenet | synthetic-cifar | mnist:DIR | cifar10:DIR | text:FILE.
  // synthetic-imagenet: random images of shape `input` (default 3x224x224) with `classes`
  // labels (default 1000); text: byte windows of the model's input length (next-byte targets).
  std::string data = "synthetic";
  int64_t train_size = 8192;    // synthetic data only
  int64_t heldout_size = 2000;  // synthetic data only; 0 = no held-out evaluation
  // File data only: the share of the training files held out for evaluation (split_heldout in
  // engine/data/dataset.h, seeded by `seed`; text: the file's last share); 0 = evaluate on the
  // test files. At most 0.5.
  double heldout_split = 0.0;
  Scaling scaling = Scaling::kStrong;
  int global_batch = 64;  // strong scaling: split over the ranks (remainders spread)
  // Micro-batches per rank and step: the local batch runs in this many chunks (split as a
  // global batch over ranks) whose gradients are summed before the allreduce (gradient
  // accumulation; a rank's memory holds one chunk's activations). 1 = off.
  int microbatches = 1;
  // The pipeline (a Plan's parallel layout): ranks = replicas x stages; rank r runs stage
  // r % stages of replica r / stages; partition holds each stage's first node (stages > 1). A
  // replica trains global_batch / replicas samples per step in `microbatches` micro-batches
  // under `pipeline_schedule`, recomputing each stage's forward before
  // its backward with `recompute`.
  int stages = 1;
  std::vector<std::string> partition;
  recipes::PipelineSchedule pipeline_schedule = recipes::PipelineSchedule::kOneFOneB;
  bool recompute = false;
  // GPU only: the optimizer state in pinned host memory, streamed through the device for each
  // update (engine/gpu/offload.h); the plan's parallel.offload.
  bool offload_optimizer = false;
  int per_rank_batch = 64;        // weak scaling: global batch = per_rank_batch * ranks
  std::string optimizer = "sgd";  // sgd (momentum) | adamw (decoupled weight decay)
  double lr = 0.01;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw
  double clip_grad_norm = 0.0;  // > 0: scale gradients to at most this global L2 norm
  std::string init_from;        // a safetensors file of the model's parameters; "" = seeded init
  // The learning-rate schedule after the warm-up: constant, step (x gamma every step_size steps)
  // or cosine (down to min_lr at `steps`). `lr` is the peak rate, the plan's lr_scale applied.
  recipes::ScheduleKind schedule = recipes::ScheduleKind::kConstant;
  int64_t step_size = 1000;
  double gamma = 0.1;
  double min_lr = 0.0;
  // Linear warm-up from 0: step s < warmup_steps runs at lr * (s + 1) / warmup_steps.
  int64_t warmup_steps = 0;
  int64_t steps = 100;
  uint64_t seed = 1;
  // Where the rank computes: "cpu" (BLAS) or "gpu" (cuBLAS / cuDNN on the rank's first
  // visible GPU; an error at start in a build without CUDA or without a device).
  std::string device = "cpu";
  // Threads per rank: the engine's pool (engine/core/thread_pool.h), pinned inside the rank's
  // binding; every op, BLAS and oneDNN run on them (results do not depend on their number).
  int threads = 1;
  uint64_t bucket_bytes = 4ull << 20;  // gradient bucket size
  bool overlap = true;                 // allreduce buckets during backward
  std::vector<AlgorithmRange> algorithms = {AlgorithmRange{}};
  int64_t eval_every = 0;        // steps between held-out evaluations; 0 = once per epoch
  int64_t log_every = 1;         // steps between metric lines
  std::string checkpoint_path;   // "" = no checkpoints
  int64_t checkpoint_every = 0;  // steps; 0 = only at the end
  // Seconds between checkpoints as well, by rank 0's clock (every rank checkpoints after the
  // same step: rank 0's decision is shared each step); 0 = none.
  double checkpoint_every_s = 0;
  std::string metrics_path;  // "" = no metrics file (rank 0 writes it)
  // "" = no trace; else every rank writes Chrome trace events to <trace_path>.rank<R>
  // (engine/trace.h; merge_traces() joins them into trace_path).
  std::string trace_path;
  // ---- compute (engine issue 38; the recipe and the plan do not carry them yet) ----
  // fp32 | bf16: bf16 compute with fp32 master weights (engine/core/precision.h says which ops).
  std::string precision = "fp32";
  // Per node name: the kernel it runs (Op::kernels(); engine/graph/kernel_select.h measures
  // them); nodes not named run their default. CPU only.
  std::map<std::string, std::string> kernels;

  // The global batch for `ranks` ranks under this scaling mode (weak: per replica, and a
  // replica is `stages` ranks).
  int global_batch_for(int ranks) const {
    return scaling == Scaling::kStrong ? global_batch : per_rank_batch * (ranks / stages);
  }
  // The algorithm name for a message of `bytes`.
  Algorithm algorithm_for(uint64_t bytes) const { return range_for(bytes).algorithm; }
  // The first range whose max_bytes is >= bytes (the last range when none is).
  const AlgorithmRange& range_for(uint64_t bytes) const;
  // Whether the data source has a held-out part to evaluate on (file data always does;
  // synthetic data when heldout_size > 0).
  bool has_heldout() const;
};

// The network a config trains: `graph`, else the built-in `model` for `input` and `classes`.
// Errors (not_found): an unknown built-in name, listing the built-ins.
Result<recipes::Graph> model_graph(const TrainConfig& config);

// Checks ranges and names (not the algorithm names: comm does); invalid_input naming the field:
// "train config: 'lr': must be positive".
Status validate(const TrainConfig& config);

// The learning rate at `step` (0-based): lr reached by linear warm-up from 0 over
// warmup_steps, then decayed by the schedule (step: gamma^(floor((step - warmup) /
// step_size)); cosine: to min_lr at `steps`).
double learning_rate(const TrainConfig& config, int64_t step);

}  // namespace dltune::engine
