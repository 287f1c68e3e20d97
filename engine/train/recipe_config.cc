#include "engine/train/recipe_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "comm/types.h"
#include "engine/data/dataset.h"
#include "recipes/data_layout.h"

namespace dltune::engine {

namespace {

Error bad(const recipes::Recipe& r, const std::string& key, const std::string& what) {
  return invalid_input("recipe '" + r.name + "': " + key + ": " + what);
}

int64_t heldout_count(const recipes::DataConfig& d) {
  return engine::heldout_count(d.samples, d.heldout_fraction);
}

Result<int64_t> file_size(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return io_error("cannot read data file '" + path + "'");
  return static_cast<int64_t>(f.tellg());
}

}  // namespace

namespace {

// Samples in the training files of mnist / cifar10 data, from their headers and sizes.
Result<int64_t> training_file_samples(const recipes::DataConfig& d) {
  if (d.kind == recipes::DataKind::kMnist) {
    const std::string path = d.path + "/train-images-idx3-ubyte";
    std::ifstream f(path, std::ios::binary);
    unsigned char h[8];
    if (!f || !f.read(reinterpret_cast<char*>(h), sizeof h))
      return io_error("cannot read the header of MNIST file '" + path + "'");
    return (int64_t{h[4]} << 24) | (int64_t{h[5]} << 16) | (int64_t{h[6]} << 8) | h[7];
  }
  int64_t n = 0;
  for (int i = 1; i <= 5; ++i) {
    auto size = file_size(d.path + "/data_batch_" + std::to_string(i) + ".bin");
    if (!size) return size.error();
    n += *size / 3073;
  }
  return n;
}

}  // namespace

Result<int64_t> train_samples(const recipes::Recipe& recipe) {
  const recipes::DataConfig& d = recipe.data;
  switch (d.kind) {
    case recipes::DataKind::kSyntheticDigits:
    case recipes::DataKind::kSyntheticImagenet:
    case recipes::DataKind::kSyntheticCifar:
      return d.samples - heldout_count(d);
    case recipes::DataKind::kText: {
      auto size = file_size(d.path);
      if (!size) return size.error();
      // read_text's windows of the training part (engine/data/dataset.h).
      return recipes::text_windows(*size - recipes::text_heldout_bytes(*size, d.heldout_fraction),
                                   d.context);
    }
    case recipes::DataKind::kMnist:
    case recipes::DataKind::kCifar10: {
      auto n = training_file_samples(d);
      if (!n) return n.error();
      // The share held out is split off the training files (split_heldout) unless the test
      // files are the held-out set.
      return d.heldout_test_files ? *n : *n - engine::heldout_count(*n, d.heldout_fraction);
    }
    case recipes::DataKind::kImageFolder:
    case recipes::DataKind::kTokens:
      return recipes::real_data_train_samples(d);
  }
  return internal_error("unknown data kind");
}

Result<TrainConfig> train_config_from(const recipes::Recipe& recipe, const recipes::Plan& plan,
                                      int ranks) {
  if (ranks < 1) return invalid_input("train_config_from: ranks must be at least 1");
  if (auto st = recipes::validate_plan(plan); !st) return std::move(st).error().wrap("plan");
  const recipes::TrainingConfig& tr = recipe.training;
  const recipes::TrainingPlan& tp = plan.training;
  TrainConfig c;

  // Model: the recipe's graph (a built-in is expanded for the data's shape and classes), named
  // after the built-in or the recipe.
  if (recipe.model.dtype != "f32")
    return bad(recipe, "model.dtype",
               "the engine trains f32 only, got '" + recipe.model.dtype + "'");
  if (recipe.model.graph.nodes.empty()) return bad(recipe, "model", "has no layers");
  c.model = recipe.model.builtin.empty() ? recipe.name : recipe.model.builtin;
  c.graph = recipe.model.graph;
  c.input = recipe.model.graph.input;
  c.classes = static_cast<int>(recipe.data.classes);

  // Data.
  const recipes::DataConfig& d = recipe.data;
  switch (d.kind) {
    case recipes::DataKind::kSyntheticDigits:
    case recipes::DataKind::kSyntheticImagenet:
    case recipes::DataKind::kSyntheticCifar:
      c.data = d.kind == recipes::DataKind::kSyntheticDigits  ? "synthetic"
               : d.kind == recipes::DataKind::kSyntheticCifar ? "synthetic-cifar"
                                                              : "synthetic-imagenet";
      c.heldout_size = heldout_count(d);
      c.train_size = d.samples - c.heldout_size;
      if (c.train_size < 1)
        return bad(recipe, "data.samples", "leaves no training samples after the held-out share");
      break;
    case recipes::DataKind::kMnist:
    case recipes::DataKind::kCifar10:
      // `heldout: test` evaluates on the test files; a share holds out part of the training
      // files (the worker splits them with split_heldout).
      c.heldout_split = d.heldout_test_files ? 0.0 : d.heldout_fraction;
      c.data = std::string(d.kind == recipes::DataKind::kMnist ? "mnist:" : "cifar10:") + d.path;
      break;
    case recipes::DataKind::kText:
      c.heldout_split = d.heldout_fraction;  // the file's last share
      c.data = "text:" + d.path;
      break;
    case recipes::DataKind::kImageFolder:
    case recipes::DataKind::kTokens:
      // Held out: the dataset's own (DIR/val, the last shard) or a share of the training
      // images (seeded) / windows (the last) (engine/data/real_data.h).
      c.heldout_split = d.heldout_test_files ? 0.0 : d.heldout_fraction;
      c.data = (d.kind == recipes::DataKind::kImageFolder ? "imagefolder:" : "tokens:") + d.path;
      break;
  }

  // The layout: replicas x stages (ranks - the plan's job shape was checked by validate_plan
  // against the plan; the ranks here must agree).
  const recipes::ParallelLayout& pl = plan.parallel;
  if (pl.replicas * pl.stages != ranks)
    return bad(recipe, "plan.parallel",
               std::to_string(pl.replicas) + " replicas x " + std::to_string(pl.stages) +
                   " stages is not the job's " + std::to_string(ranks) + " ranks");
  c.stages = pl.stages;
  c.partition = pl.partition;
  c.microbatches = pl.microbatches;
  c.pipeline_schedule = std::string(recipes::schedule_name(pl.schedule));
  c.recompute = pl.recompute == recipes::Recompute::kStage;
  c.offload_optimizer = pl.offload == recipes::Offload::kOptimizer;

  // Batch: per replica (every rank under data parallelism).
  const int replicas = pl.replicas;
  if (tp.scaling == recipes::Scaling::kWeak) {
    if (tp.per_rank_batch < 1)
      return bad(recipe, "plan.training.per_rank_batch", "must be at least 1");
    if (tp.global_batch != tp.per_rank_batch * replicas)
      return bad(recipe, "plan.training.global_batch",
                 std::to_string(tp.global_batch) + " is not per_rank_batch " +
                     std::to_string(tp.per_rank_batch) + " x " + std::to_string(replicas) +
                     " replicas");
    c.scaling = Scaling::kWeak;
    c.per_rank_batch = static_cast<int>(tp.per_rank_batch);
    c.global_batch = static_cast<int>(tp.global_batch);
  } else {
    if (tp.global_batch < replicas)
      return bad(recipe, "plan.training.global_batch",
                 "global batch " + std::to_string(tp.global_batch) + " gives some of the " +
                     std::to_string(replicas) + " replicas no samples");
    c.scaling = Scaling::kStrong;
    c.global_batch = static_cast<int>(tp.global_batch);
    c.per_rank_batch = static_cast<int>((tp.global_batch + replicas - 1) / replicas);
  }
  const int global = c.global_batch_for(ranks);
  if (tr.max_global_batch > 0 && global > tr.max_global_batch)
    return bad(recipe, "training.batch.max_global",
               "the plan's global batch " + std::to_string(global) + " exceeds it (" +
                   std::to_string(tr.max_global_batch) + ")");

  // Optimizer and schedule.
  if (!(tp.lr_scale > 0.0)) return bad(recipe, "plan.training.lr_scale", "must be positive");
  if (tr.optimizer.kind != "sgd" && tr.optimizer.kind != "adamw")
    return bad(recipe, "training.optimizer.kind",
               "the engine runs sgd and adamw, not '" + tr.optimizer.kind + "'");
  c.optimizer = tr.optimizer.kind;
  c.lr = tr.optimizer.lr * tp.lr_scale;
  c.momentum = tr.optimizer.momentum;
  c.weight_decay = tr.optimizer.weight_decay;
  c.beta1 = tr.optimizer.beta1;
  c.beta2 = tr.optimizer.beta2;
  c.eps = tr.optimizer.eps;
  c.clip_grad_norm = tr.optimizer.clip_grad_norm;
  c.init_from = tr.init_from;
  c.linear_scaling = false;  // the plan's lr_scale already carries it
  c.warmup_steps = std::max(tr.schedule.warmup_steps, tp.warmup_steps);
  c.warmup_from_zero = true;
  switch (tr.schedule.kind) {
    case recipes::ScheduleKind::kConstant:
      c.schedule = "constant";
      break;
    case recipes::ScheduleKind::kStep:
      c.schedule = "step";
      if (tr.schedule.step_size < 1)
        return bad(recipe, "training.schedule.step_size", "must be at least 1");
      c.step_size = tr.schedule.step_size;
      c.gamma = tr.schedule.gamma;
      break;
    case recipes::ScheduleKind::kCosine:
      c.schedule = "cosine";
      c.min_lr = tr.schedule.min_lr;
      break;
  }
  c.seed = tr.seed;
  c.checkpoint_every = tr.checkpoint_every;

  // Length.
  if (tr.steps > 0) {
    c.steps = tr.steps;
  } else {
    auto n = train_samples(recipe);
    if (!n) return n.error();
    if (*n < 1) return bad(recipe, "data", "has no training samples");
    c.steps = tr.epochs * ((*n + global - 1) / global);
  }

  // Communication.
  c.bucket_bytes = tp.bucket_bytes;
  c.overlap = tp.overlap;
  // Recipes have no device key: `comm.backend: nccl` means the ranks compute on their GPUs.
  if (recipe.comm.backend == "nccl") c.device = "gpu";
  if (c.offload_optimizer && c.device != "gpu")
    return bad(recipe, "plan.parallel.offload",
               "optimizer offload needs the GPU engine (comm.backend nccl); this recipe trains on "
               "the CPU, whose optimizer state is in host memory already");
  c.algorithms.clear();
  if (auto it = plan.collectives.find(recipes::Collective::kAllreduce);
      it != plan.collectives.end() && !it->second.empty()) {
    for (size_t i = 0; i < it->second.size(); ++i) {
      const recipes::SizeRange& r = it->second[i];
      const std::string name(recipes::algorithm_name(r.algo));
      if (!comm::parse_algorithm(name))
        return bad(recipe, "plan.collectives.allreduce[" + std::to_string(i) + "]",
                   "algorithm '" + name + "' is not one the CPU engine runs");
      // Plan ranges are [min, max); engine ranges are "at most max_bytes".
      const uint64_t max = r.max_bytes == recipes::kPlanMaxBytes ? UINT64_MAX : r.max_bytes - 1;
      const uint64_t segment =
          r.algo == recipes::Algorithm::kRing || r.algo == recipes::Algorithm::kHierarchical
              ? r.segment_bytes
              : 0;
      if (!c.algorithms.empty() && c.algorithms.back().algorithm == name &&
          c.algorithms.back().segment_bytes == segment)
        c.algorithms.back().max_bytes = max;
      else
        c.algorithms.push_back(AlgorithmRange{max, name, segment});
    }
  } else {
    c.algorithms.push_back(AlgorithmRange{UINT64_MAX, "ring"});
  }
  if (auto st = validate(c); !st) return std::move(st).error().wrap("recipe '" + recipe.name + "'");
  return c;
}

}  // namespace dltune::engine
