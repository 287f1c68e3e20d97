#include "engine/train/train_config.h"

#include <algorithm>
#include <cmath>

#include "common/strings.h"
#include "engine/core/precision.h"
#include "recipes/model/builtins.h"

namespace dltune::engine {

const AlgorithmRange& TrainConfig::range_for(uint64_t bytes) const {
  for (const auto& r : algorithms)
    if (bytes <= r.max_bytes) return r;
  return algorithms.back();
}

bool TrainConfig::has_heldout() const { return !data.starts_with("synthetic") || heldout_size > 0; }

Result<recipes::Graph> model_graph(const TrainConfig& c) {
  if (!c.graph.nodes.empty()) return c.graph;
  recipes::BuiltinOptions o;
  o.classes = c.classes;
  o.input = c.input;
  auto g = recipes::builtin_graph(c.model, o);
  if (!g)
    return not_found("unknown model '" + c.model + "'; built-in models are " +
                     strings::join(recipes::builtin_model_names(), ", "));
  if (c.data.starts_with("text:") || c.data.starts_with("tokens:"))
    g->input_kind = recipes::InputKind::kTokens;
  return *g;
}

Status validate(const TrainConfig& c) {
  auto bad = [](const std::string& key, const std::string& what) {
    return invalid_input("train config: '" + key + "': " + what);
  };
  if (c.model.empty()) return bad("model", "must name a model");
  if (c.global_batch < 1) return bad("global_batch", "must be at least 1");
  if (c.per_rank_batch < 1) return bad("per_rank_batch", "must be at least 1");
  if (c.microbatches < 1 || c.microbatches > 4096) return bad("microbatches", "must be in 1..4096");
  if (c.stages < 1 || c.stages > 4096) return bad("stages", "must be in 1..4096");
  if (c.stages > 1 && c.partition.size() != static_cast<size_t>(c.stages))
    return bad("partition", "needs one first node per stage (" + std::to_string(c.stages) + ")");
  if (c.stages == 1 && !c.partition.empty()) return bad("partition", "one stage has none");
  if (c.scaling == Scaling::kAuto) return bad("scaling", "must be strong or weak");
  if (!(c.lr > 0.0)) return bad("lr", "must be positive");
  if (!(c.momentum >= 0.0 && c.momentum < 1.0)) return bad("momentum", "must be in [0, 1)");
  if (!(c.weight_decay >= 0.0)) return bad("weight_decay", "must be non-negative");
  if (c.step_size < 1) return bad("step_size", "must be at least 1");
  if (c.warmup_steps < 0) return bad("warmup_steps", "must be non-negative");
  if (c.steps < 0) return bad("steps", "must be non-negative");
  if (c.device != "cpu" && c.device != "gpu")
    return bad("device", "expected cpu or gpu, got '" + c.device + "'");
  if (c.offload_optimizer && c.device != "gpu")
    return bad("offload_optimizer",
               "offloads the GPU engine's optimizer state to host memory; device '" + c.device +
                   "' keeps it there already");
  if (c.threads < 1 || c.threads > 1024) return bad("threads", "must be in 1..1024");
  Precision p;
  if (!parse_precision(c.precision, &p))
    return bad("precision", "expected fp32 or bf16, got '" + c.precision + "'");
  for (const auto& [node, kernel] : c.kernels) {
    if (node.empty() || kernel.empty())
      return bad("kernels", "every entry needs a node name and a kernel name");
  }
  if (c.bucket_bytes < 4) return bad("bucket_bytes", "must be at least 4");
  if (c.algorithms.empty()) return bad("algorithms", "needs at least one range");
  for (size_t i = 1; i < c.algorithms.size(); ++i)
    if (c.algorithms[i].max_bytes <= c.algorithms[i - 1].max_bytes)
      return bad("algorithms", "ranges must be sorted by increasing max_bytes");
  if (c.eval_every < 0 || c.log_every < 1 || c.checkpoint_every < 0 || !(c.checkpoint_every_s >= 0))
    return bad("eval_every/log_every/checkpoint_every/checkpoint_every_s",
               "must be non-negative (log_every >= 1)");
  if (c.train_size < 1 || c.heldout_size < 0) return bad("train_size", "must be positive");
  if (!(c.heldout_split >= 0.0 && c.heldout_split <= 0.5))
    return bad("heldout_split", "must be in [0, 0.5]");
  if (c.heldout_split > 0.0 && c.data.starts_with("synthetic"))
    return bad("heldout_split",
               "applies to mnist / cifar10 / text data only (synthetic data: heldout_size)");
  if (!(c.min_lr >= 0.0)) return bad("min_lr", "must be non-negative");
  for (int64_t d : c.input)
    if (d < 1 || d > (int64_t{1} << 31)) return bad("input", "expected positive sizes");
  if (c.classes < 0) return bad("classes", "must be non-negative");
  if (c.optimizer != "sgd" && c.optimizer != "adamw")
    return bad("optimizer", "expected sgd or adamw, got '" + c.optimizer + "'");
  if (!(c.beta1 >= 0.0 && c.beta1 < 1.0) || !(c.beta2 >= 0.0 && c.beta2 < 1.0))
    return bad("beta1/beta2", "must be in [0, 1)");
  if (!(c.eps > 0.0)) return bad("eps", "must be positive");
  if (!(c.clip_grad_norm >= 0.0)) return bad("clip_grad_norm", "must be non-negative");
  return ok_status();
}

double learning_rate(const TrainConfig& c, int64_t step) {
  const double peak = c.lr;
  if (step < c.warmup_steps)
    return peak * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  const int64_t t = step - c.warmup_steps;
  if (c.schedule == recipes::ScheduleKind::kStep)
    return peak * std::pow(c.gamma, static_cast<double>(t / c.step_size));
  if (c.schedule == recipes::ScheduleKind::kCosine) {
    const int64_t span = std::max<int64_t>(1, c.steps - c.warmup_steps);
    const double frac = std::min(1.0, static_cast<double>(t) / static_cast<double>(span));
    return c.min_lr + (peak - c.min_lr) * 0.5 * (1.0 + std::cos(M_PI * frac));
  }
  return peak;
}

}  // namespace dltune::engine
