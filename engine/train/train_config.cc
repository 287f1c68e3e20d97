#include "engine/train/train_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "common/json_input.h"
#include "common/strings.h"
#include "engine/train/train_config_compute.h"
#include "recipes/model/builtins.h"

namespace dltune::engine {

using nlohmann::json;

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
  if (c.data.starts_with("text:")) g->input_kind = recipes::InputKind::kTokens;
  return *g;
}

Status validate(const TrainConfig& c) {
  auto bad = [](const std::string& key, const std::string& what) {
    return invalid_input("train config: key '" + key + "': " + what);
  };
  if (c.model.empty()) return bad("model", "must name a model");
  if (c.global_batch < 1) return bad("global_batch", "must be at least 1");
  if (c.per_rank_batch < 1) return bad("per_rank_batch", "must be at least 1");
  if (c.microbatches < 1 || c.microbatches > 4096) return bad("microbatches", "must be in 1..4096");
  if (c.stages < 1 || c.stages > 4096) return bad("stages", "must be in 1..4096");
  if (c.stages > 1 && c.partition.size() != static_cast<size_t>(c.stages))
    return bad("partition", "needs one first node per stage (" + std::to_string(c.stages) + ")");
  if (c.stages == 1 && !c.partition.empty()) return bad("partition", "one stage has none");
  if (c.pipeline_schedule != "gpipe" && c.pipeline_schedule != "1f1b" &&
      c.pipeline_schedule != "async")
    return bad("pipeline_schedule",
               "expected gpipe, 1f1b or async, got '" + c.pipeline_schedule + "'");
  if (!(c.lr > 0.0)) return bad("lr", "must be positive");
  if (!(c.momentum >= 0.0 && c.momentum < 1.0)) return bad("momentum", "must be in [0, 1)");
  if (!(c.weight_decay >= 0.0)) return bad("weight_decay", "must be non-negative");
  if (c.schedule != "constant" && c.schedule != "step" && c.schedule != "cosine")
    return bad("schedule", "expected constant, step or cosine, got '" + c.schedule + "'");
  if (c.step_size < 1) return bad("step_size", "must be at least 1");
  if (c.reference_batch < 1) return bad("reference_batch", "must be at least 1");
  if (c.warmup_steps < 0) return bad("warmup_steps", "must be non-negative");
  if (c.steps < 0) return bad("steps", "must be non-negative");
  if (c.device != "cpu" && c.device != "gpu")
    return bad("device", "expected cpu or gpu, got '" + c.device + "'");
  if (c.offload_optimizer && c.device != "gpu")
    return bad("offload_optimizer",
               "offloads the GPU engine's optimizer state to host memory; device '" + c.device +
                   "' keeps it there already");
  if (c.threads < 1 || c.threads > 1024) return bad("threads", "must be in 1..1024");
  DLTUNE_TRY(validate_compute(c));
  if (c.bucket_bytes < 4) return bad("bucket_bytes", "must be at least 4");
  if (c.algorithms.empty()) return bad("algorithms", "needs at least one range");
  for (size_t i = 1; i < c.algorithms.size(); ++i)
    if (c.algorithms[i].max_bytes <= c.algorithms[i - 1].max_bytes)
      return bad("algorithms", "ranges must be sorted by increasing max_bytes");
  if (c.eval_every < 0 || c.log_every < 1 || c.checkpoint_every < 0)
    return bad("eval_every/log_every/checkpoint_every", "must be non-negative (log_every >= 1)");
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

namespace {

template <typename T>
Status get(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end()) return ok_status();
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    return invalid_input(std::string("train config: key '") + key + "': wrong type (" + it->dump() +
                         ")");
  }
  return ok_status();
}

}  // namespace

Result<TrainConfig> parse_train_config(const std::string& text) {
  auto parsed = parse_json_bounded(text);
  if (!parsed) return parsed.error().wrap("train config");
  json j = std::move(*parsed);
  if (!j.is_object()) return invalid_input("train config: not a JSON object");
  static const char* kKeys[] = {"model",
                                "data",
                                "train_size",
                                "heldout_size",
                                "heldout_split",
                                "scaling",
                                "global_batch",
                                "per_rank_batch",
                                "microbatches",
                                "stages",
                                "partition",
                                "pipeline_schedule",
                                "recompute",
                                "offload_optimizer",
                                "lr",
                                "momentum",
                                "weight_decay",
                                "schedule",
                                "step_size",
                                "gamma",
                                "linear_scaling",
                                "reference_batch",
                                "warmup_steps",
                                "steps",
                                "seed",
                                "threads",
                                "bucket_bytes",
                                "overlap",
                                "algorithms",
                                "eval_every",
                                "log_every",
                                "checkpoint_path",
                                "checkpoint_every",
                                "metrics_path",
                                "graph",
                                "input",
                                "optimizer",
                                "beta1",
                                "beta2",
                                "eps",
                                "clip_grad_norm",
                                "init_from",
                                "classes",
                                "min_lr",
                                "warmup_from_zero",
                                "trace_path",
                                "device",
                                "precision",
                                "kernels"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) return invalid_input("train config: unknown key '" + key + "'");
  }
  TrainConfig c;
  std::string scaling = "strong";
  DLTUNE_TRY(get(j, "model", c.model));
  DLTUNE_TRY(get(j, "data", c.data));
  DLTUNE_TRY(get(j, "train_size", c.train_size));
  DLTUNE_TRY(get(j, "heldout_size", c.heldout_size));
  DLTUNE_TRY(get(j, "heldout_split", c.heldout_split));
  DLTUNE_TRY(get(j, "scaling", scaling));
  DLTUNE_TRY(get(j, "global_batch", c.global_batch));
  DLTUNE_TRY(get(j, "per_rank_batch", c.per_rank_batch));
  DLTUNE_TRY(get(j, "microbatches", c.microbatches));
  DLTUNE_TRY(get(j, "stages", c.stages));
  DLTUNE_TRY(get(j, "partition", c.partition));
  DLTUNE_TRY(get(j, "pipeline_schedule", c.pipeline_schedule));
  DLTUNE_TRY(get(j, "recompute", c.recompute));
  DLTUNE_TRY(get(j, "offload_optimizer", c.offload_optimizer));
  DLTUNE_TRY(get(j, "lr", c.lr));
  DLTUNE_TRY(get(j, "momentum", c.momentum));
  DLTUNE_TRY(get(j, "weight_decay", c.weight_decay));
  DLTUNE_TRY(get(j, "schedule", c.schedule));
  DLTUNE_TRY(get(j, "step_size", c.step_size));
  DLTUNE_TRY(get(j, "gamma", c.gamma));
  DLTUNE_TRY(get(j, "linear_scaling", c.linear_scaling));
  DLTUNE_TRY(get(j, "reference_batch", c.reference_batch));
  DLTUNE_TRY(get(j, "warmup_steps", c.warmup_steps));
  DLTUNE_TRY(get(j, "steps", c.steps));
  DLTUNE_TRY(get(j, "seed", c.seed));
  DLTUNE_TRY(get(j, "device", c.device));
  DLTUNE_TRY(get(j, "threads", c.threads));
  DLTUNE_TRY(get(j, "bucket_bytes", c.bucket_bytes));
  DLTUNE_TRY(get(j, "overlap", c.overlap));
  DLTUNE_TRY(get(j, "eval_every", c.eval_every));
  DLTUNE_TRY(get(j, "log_every", c.log_every));
  DLTUNE_TRY(get(j, "checkpoint_path", c.checkpoint_path));
  DLTUNE_TRY(get(j, "checkpoint_every", c.checkpoint_every));
  DLTUNE_TRY(get(j, "metrics_path", c.metrics_path));
  DLTUNE_TRY(get(j, "trace_path", c.trace_path));
  DLTUNE_TRY(get(j, "classes", c.classes));
  DLTUNE_TRY(get(j, "min_lr", c.min_lr));
  DLTUNE_TRY(get(j, "warmup_from_zero", c.warmup_from_zero));
  DLTUNE_TRY(get(j, "input", c.input));
  DLTUNE_TRY(get(j, "optimizer", c.optimizer));
  DLTUNE_TRY(get(j, "beta1", c.beta1));
  DLTUNE_TRY(get(j, "beta2", c.beta2));
  DLTUNE_TRY(get(j, "eps", c.eps));
  DLTUNE_TRY(get(j, "clip_grad_norm", c.clip_grad_norm));
  DLTUNE_TRY(get(j, "init_from", c.init_from));
  DLTUNE_TRY(parse_compute(j, c));
  if (auto it = j.find("graph"); it != j.end()) {
    auto graph = recipes::graph_from_json(*it);
    if (!graph) return graph.error().wrap("train config: key 'graph'");
    c.graph = std::move(*graph);
  }
  if (scaling == "strong") {
    c.scaling = Scaling::kStrong;
  } else if (scaling == "weak") {
    c.scaling = Scaling::kWeak;
  } else {
    return invalid_input("train config: key 'scaling': expected strong or weak, got '" + scaling +
                         "'");
  }
  if (auto it = j.find("algorithms"); it != j.end()) {
    if (!it->is_array())
      return invalid_input(
          "train config: key 'algorithms': expected a list of "
          "{\"max_bytes\": N, \"algorithm\": NAME, \"segment_bytes\": N}");
    c.algorithms.clear();
    for (const auto& e : *it) {
      AlgorithmRange r;
      if (!e.is_object() || !e.contains("algorithm") || !e["algorithm"].is_string())
        return invalid_input("train config: key 'algorithms': each entry needs an 'algorithm'");
      r.algorithm = e["algorithm"].get<std::string>();
      if (e.contains("max_bytes")) {
        if (!e["max_bytes"].is_number_unsigned())
          return invalid_input(
              "train config: key 'algorithms': max_bytes must be a "
              "non-negative integer");
        r.max_bytes = e["max_bytes"].get<uint64_t>();
      }
      if (e.contains("segment_bytes")) {
        if (!e["segment_bytes"].is_number_unsigned())
          return invalid_input(
              "train config: key 'algorithms': segment_bytes must be a non-negative integer");
        r.segment_bytes = e["segment_bytes"].get<uint64_t>();
      }
      c.algorithms.push_back(r);
    }
  }
  DLTUNE_TRY(validate(c));
  return c;
}

std::string to_json(const TrainConfig& c) {
  json algos = json::array();
  for (const auto& r : c.algorithms) {
    json e = {{"max_bytes", r.max_bytes}, {"algorithm", r.algorithm}};
    if (r.segment_bytes != 0) e["segment_bytes"] = r.segment_bytes;
    algos.push_back(std::move(e));
  }
  json j = {{"model", c.model},
            {"data", c.data},
            {"train_size", c.train_size},
            {"heldout_size", c.heldout_size},
            {"heldout_split", c.heldout_split},
            {"scaling", c.scaling == Scaling::kStrong ? "strong" : "weak"},
            {"global_batch", c.global_batch},
            {"per_rank_batch", c.per_rank_batch},
            {"microbatches", c.microbatches},
            {"stages", c.stages},
            {"partition", c.partition},
            {"pipeline_schedule", c.pipeline_schedule},
            {"recompute", c.recompute},
            {"offload_optimizer", c.offload_optimizer},
            {"optimizer", c.optimizer},
            {"lr", c.lr},
            {"momentum", c.momentum},
            {"beta1", c.beta1},
            {"beta2", c.beta2},
            {"eps", c.eps},
            {"clip_grad_norm", c.clip_grad_norm},
            {"init_from", c.init_from},
            {"weight_decay", c.weight_decay},
            {"schedule", c.schedule},
            {"step_size", c.step_size},
            {"gamma", c.gamma},
            {"linear_scaling", c.linear_scaling},
            {"reference_batch", c.reference_batch},
            {"warmup_steps", c.warmup_steps},
            {"steps", c.steps},
            {"seed", c.seed},
            {"device", c.device},
            {"threads", c.threads},
            {"bucket_bytes", c.bucket_bytes},
            {"overlap", c.overlap},
            {"algorithms", algos},
            {"eval_every", c.eval_every},
            {"log_every", c.log_every},
            {"checkpoint_path", c.checkpoint_path},
            {"checkpoint_every", c.checkpoint_every},
            {"metrics_path", c.metrics_path},
            {"trace_path", c.trace_path},
            {"min_lr", c.min_lr},
            {"warmup_from_zero", c.warmup_from_zero},
            {"classes", c.classes}};
  if (!c.input.empty()) j["input"] = c.input;
  if (!c.graph.nodes.empty()) j["graph"] = recipes::graph_to_json(c.graph);
  compute_to_json(c, j);
  return j.dump(2);
}

double learning_rate(const TrainConfig& c, int global_batch, int64_t step) {
  const double base = c.lr;
  const double peak =
      c.linear_scaling ? base * global_batch / static_cast<double>(c.reference_batch) : base;
  if (step < c.warmup_steps) {
    if (c.warmup_from_zero)
      return peak * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
    // Goyal et al.: ramp linearly from the base to the scaled rate.
    return base + (peak - base) * static_cast<double>(step) / static_cast<double>(c.warmup_steps);
  }
  const int64_t t = step - c.warmup_steps;
  if (c.schedule == "step") return peak * std::pow(c.gamma, static_cast<double>(t / c.step_size));
  if (c.schedule == "cosine") {
    const int64_t span = std::max<int64_t>(1, c.steps - c.warmup_steps);
    const double frac = std::min(1.0, static_cast<double>(t) / static_cast<double>(span));
    return c.min_lr + (peak - c.min_lr) * 0.5 * (1.0 + std::cos(M_PI * frac));
  }
  return peak;
}

}  // namespace dltune::engine
