#include "engine/recipe_config.h"

#include <cmath>
#include <fstream>

#include "comm/types.h"
#include "engine/dataset.h"
#include "engine/models.h"

namespace dltune::engine {

namespace {

Error bad(const recipes::Recipe& r, const std::string& key, const std::string& what) {
  return invalid_input("recipe '" + r.name + "': " + key + ": " + what);
}

LayerSpec::Kind engine_kind(recipes::LayerKind k) {
  using R = recipes::LayerKind;
  using E = LayerSpec::Kind;
  switch (k) {
    case R::kLinear:
      return E::kLinear;
    case R::kConv2d:
      return E::kConv2d;
    case R::kMaxPool:
      return E::kMaxPool;
    case R::kAvgPool:
      return E::kAvgPool;
    case R::kRelu:
      return E::kRelu;
    case R::kDropout:
      return E::kDropout;
    case R::kLrn:
      return E::kLrn;
    case R::kFlatten:
      return E::kFlatten;
  }
  return E::kRelu;
}

LayerSpec engine_layer(const recipes::LayerSpec& l) {
  LayerSpec e;
  e.kind = engine_kind(l.kind);
  e.out = static_cast<int>(l.out);
  e.kernel = static_cast<int>(l.kernel);
  e.stride = static_cast<int>(l.stride);
  e.pad = static_cast<int>(l.pad);
  e.groups = static_cast<int>(l.groups);
  e.p = static_cast<float>(l.p);
  e.lrn_size = static_cast<int>(l.size);
  e.alpha = static_cast<float>(l.alpha);
  e.beta = static_cast<float>(l.beta);
  e.k = static_cast<float>(l.k);
  return e;
}

// Layer lists equal in what each kind uses (engine_layer fills unused fields identically).
bool same_layers(const std::vector<LayerSpec>& a, const std::vector<LayerSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const LayerSpec &x = a[i], &y = b[i];
    if (x.kind != y.kind) return false;
    using K = LayerSpec::Kind;
    switch (x.kind) {
      case K::kLinear:
        if (x.out != y.out) return false;
        break;
      case K::kConv2d:
        if (x.out != y.out || x.kernel != y.kernel || x.stride != y.stride || x.pad != y.pad ||
            x.groups != y.groups)
          return false;
        break;
      case K::kMaxPool:
      case K::kAvgPool:
        if (x.kernel != y.kernel || x.stride != y.stride || x.pad != y.pad) return false;
        break;
      case K::kDropout:
        if (x.p != y.p) return false;
        break;
      case K::kLrn:
        if (x.lrn_size != y.lrn_size || x.alpha != y.alpha || x.beta != y.beta || x.k != y.k)
          return false;
        break;
      case K::kRelu:
      case K::kFlatten:
        break;
    }
  }
  return true;
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
      return d.samples - heldout_count(d);
    case recipes::DataKind::kMnist:
    case recipes::DataKind::kCifar10: {
      auto n = training_file_samples(d);
      if (!n) return n.error();
      // The share held out is split off the training files (split_heldout) unless the test
      // files are the held-out set.
      return d.heldout_test_files ? *n : *n - engine::heldout_count(*n, d.heldout_fraction);
    }
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

  // Model: the engine's built-in of that name when it is the same network, else the layers.
  if (recipe.model.dtype != "f32")
    return bad(recipe, "model.dtype",
               "the engine trains f32 only, got '" + recipe.model.dtype + "'");
  const recipes::Shape& shape = recipe.data.shape;
  if (shape.size() != 3 && shape.size() != 1)
    return bad(recipe, "data.shape", "expected [C, H, W] or [N]");
  const Dims input =
      shape.size() == 3
          ? Dims{static_cast<int>(shape[0]), static_cast<int>(shape[1]), static_cast<int>(shape[2])}
          : Dims{static_cast<int>(shape[0]), 1, 1};
  std::vector<LayerSpec> layers;
  for (const auto& l : recipe.model.layers) layers.push_back(engine_layer(l));
  if (layers.empty()) return bad(recipe, "model", "has no layers");
  auto builtin = recipe.model.builtin.empty() ? Result<ModelSpec>(not_found(""))
                                              : builtin_model(recipe.model.builtin);
  if (builtin && builtin->input == input && builtin->classes == recipe.data.classes &&
      same_layers(builtin->layers, layers)) {
    c.model = recipe.model.builtin;
  } else {
    c.model = recipe.model.builtin.empty() ? recipe.name : recipe.model.builtin;
    c.layers = std::move(layers);
    c.input = input;
    c.classes = static_cast<int>(recipe.data.classes);
  }

  // Data.
  const recipes::DataConfig& d = recipe.data;
  switch (d.kind) {
    case recipes::DataKind::kSyntheticDigits:
    case recipes::DataKind::kSyntheticImagenet:
      c.data = d.kind == recipes::DataKind::kSyntheticDigits ? "synthetic" : "synthetic-imagenet";
      c.heldout_size = heldout_count(d);
      c.train_size = d.samples - c.heldout_size;
      if (c.train_size < 1)
        return bad(recipe, "data.samples", "leaves no training samples after the held-out share");
      if (d.kind == recipes::DataKind::kSyntheticImagenet) {
        c.input = input;
        c.classes = static_cast<int>(d.classes);
      }
      break;
    case recipes::DataKind::kMnist:
    case recipes::DataKind::kCifar10:
      // `heldout: test` evaluates on the test files; a share holds out part of the training
      // files (the worker splits them with split_heldout).
      c.heldout_split = d.heldout_test_files ? 0.0 : d.heldout_fraction;
      c.data = std::string(d.kind == recipes::DataKind::kMnist ? "mnist:" : "cifar10:") + d.path;
      break;
  }

  // Batch.
  if (tp.scaling == recipes::Scaling::kWeak) {
    if (tp.per_rank_batch < 1)
      return bad(recipe, "plan.training.per_rank_batch", "must be at least 1");
    if (tp.global_batch != tp.per_rank_batch * ranks)
      return bad(recipe, "plan.training.global_batch",
                 std::to_string(tp.global_batch) + " is not per_rank_batch " +
                     std::to_string(tp.per_rank_batch) + " x " + std::to_string(ranks) + " ranks");
    c.scaling = Scaling::kWeak;
    c.per_rank_batch = static_cast<int>(tp.per_rank_batch);
    c.global_batch = static_cast<int>(tp.global_batch);
  } else {
    if (tp.global_batch < ranks)
      return bad(recipe, "plan.training.global_batch",
                 "global batch " + std::to_string(tp.global_batch) + " gives some of the " +
                     std::to_string(ranks) + " ranks no samples");
    c.scaling = Scaling::kStrong;
    c.global_batch = static_cast<int>(tp.global_batch);
    c.per_rank_batch = static_cast<int>((tp.global_batch + ranks - 1) / ranks);
  }
  const int global = c.global_batch_for(ranks);
  if (tr.max_global_batch > 0 && global > tr.max_global_batch)
    return bad(recipe, "training.batch.max_global",
               "the plan's global batch " + std::to_string(global) + " exceeds it (" +
                   std::to_string(tr.max_global_batch) + ")");

  // Optimizer and schedule.
  if (tr.optimizer.kind != "sgd")
    return bad(recipe, "training.optimizer.kind", "the engine runs sgd only");
  if (!(tp.lr_scale > 0.0)) return bad(recipe, "plan.training.lr_scale", "must be positive");
  c.lr = tr.optimizer.lr * tp.lr_scale;
  c.momentum = tr.optimizer.momentum;
  c.weight_decay = tr.optimizer.weight_decay;
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
      const uint64_t segment = r.algo == recipes::Algorithm::kRing ? r.segment_bytes : 0;
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
