// The normalised view of a Recipe (`dltune recipe show`): every default filled in, only the
// keys that apply (no placeholder values such as "epochs": 0 or "path": ""), in the order a
// recipe file lists them.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "recipes/recipe.h"

namespace dltune::recipes {
namespace {

using json = nlohmann::ordered_json;

json model_json(const Recipe& r) {
  const GraphInfo info = analyze_graph(r.model.graph);
  const char* forms[] = {"builtin", "layers", "nodes"};
  json j = {{"form", forms[static_cast<int>(r.model.form)]}};
  if (r.model.form == ModelForm::kBuiltin) j["builtin"] = r.model.builtin;
  j["dtype"] = r.model.dtype;
  j["input"] = r.model.input;
  j["parameters"] = info.parameters;
  j["flops_per_sample"] = info.flops_per_sample;
  j["graph"] = json(graph_to_json(r.model.graph));
  return j;
}

json training_json(const TrainingConfig& t) {
  const OptimizerConfig& o = t.optimizer;
  const ScheduleConfig& s = t.schedule;
  auto auto_or = [](int64_t v) { return v > 0 ? json(v) : json("auto"); };
  // Only what applies: epochs or steps, each optimizer's own settings, each schedule's own.
  json j = json::object();
  if (t.steps > 0) j["steps"] = t.steps;
  if (t.steps <= 0) j["epochs"] = t.epochs;
  json batch = {{"per_rank", auto_or(t.per_rank_batch)}, {"global", auto_or(t.global_batch)}};
  if (t.max_global_batch > 0) batch["max_global"] = t.max_global_batch;
  j["batch"] = batch;
  j["scaling"] = scaling_name(t.scaling);
  j["precision"] = t.precision;
  json opt = {{"kind", o.kind}, {"lr", o.lr}};
  if (o.kind == "sgd") opt["momentum"] = o.momentum;
  if (o.kind == "adamw") {
    opt["betas"] = {o.beta1, o.beta2};
    opt["eps"] = o.eps;
  }
  opt["weight_decay"] = o.weight_decay;
  opt["lr_reference_batch"] = auto_or(o.lr_reference_batch);
  opt["lr_scaling"] = lr_scaling_name(o.lr_scaling);
  opt["clip_grad_norm"] = o.clip_grad_norm > 0 ? json(o.clip_grad_norm) : json("off");
  j["optimizer"] = opt;
  json sched = {{"kind", schedule_kind_name(s.kind)}, {"warmup_steps", s.warmup_steps}};
  if (s.kind == ScheduleKind::kStep) {
    sched["step_size"] = s.step_size;
    sched["gamma"] = s.gamma;
  }
  if (s.kind == ScheduleKind::kCosine) sched["min_lr"] = s.min_lr;
  j["schedule"] = sched;
  j["checkpoint_every"] = t.checkpoint_every;
  j["checkpoint_every_seconds"] = t.checkpoint_every_seconds;
  j["seed"] = t.seed;
  if (!t.init_from.empty()) j["init_from"] = t.init_from;
  j["parallel"] = {{"mode", t.parallel.mode},
                   {"stages", auto_or(t.parallel.stages)},
                   {"microbatches", auto_or(t.parallel.microbatches)},
                   {"schedule", t.parallel.schedule},
                   {"recompute", t.parallel.recompute},
                   {"offload", t.parallel.offload}};
  return j;
}

json data_json(const DataConfig& d) {
  json j = {{"kind", data_kind_name(d.kind)}};
  if (!d.path.empty()) j["path"] = d.path;
  j["shape"] = d.shape;
  j["classes"] = d.classes;
  if (d.samples > 0) j["samples"] = d.samples;
  if (d.kind == DataKind::kText || d.kind == DataKind::kTokens) j["context"] = d.context;
  const bool val = d.kind == DataKind::kImageFolder || d.kind == DataKind::kTokens;
  j["heldout"] = d.heldout_test_files ? json(val ? "val" : "test") : json(d.heldout_fraction);
  return j;
}

json tune_json(const TuneConfig& t) {
  json j = {
      {"budget", t.budget_seconds},
      {"restart_budget", t.restart_budget_seconds},
      {"objective", t.objective == Objective::kThroughput ? "throughput" : "time-to-accuracy"}};
  if (t.objective == Objective::kTimeToAccuracy) j["target_accuracy"] = t.target_accuracy;
  return j;
}

// The view both formats print.
json recipe_view(const Recipe& r) {
  const char* overlap[] = {"auto", "on", "off"};
  json j = {{"name", r.name}};
  if (!r.description.empty()) j["description"] = r.description;
  if (!r.source_path.empty()) j["source_path"] = r.source_path;
  j["signature"] = recipe_signature(r);
  j["model"] = model_json(r);
  j["data"] = data_json(r.data);
  j["training"] = training_json(r.training);
  j["comm"] = {{"backend", r.comm.backend},
               {"allreduce", r.comm.allreduce ? algorithm_name(*r.comm.allreduce) : "auto"},
               {"bucket", r.comm.bucket_bytes > 0 ? json(r.comm.bucket_bytes) : json("auto")},
               {"overlap", overlap[static_cast<int>(r.comm.overlap)]}};
  j["tune"] = tune_json(r.tune);
  j["launch"] = {{"ranks", r.launch.ranks > 0 ? json(r.launch.ranks) : json("auto")},
                 {"ranks_per_node",
                  r.launch.ranks_per_node > 0 ? json(r.launch.ranks_per_node) : json("auto")},
                 {"threads_per_rank",
                  r.launch.threads_per_rank > 0 ? json(r.launch.threads_per_rank) : json("auto")},
                 {"binding", r.launch.binding},
                 {"memory_per_rank",
                  r.launch.memory_per_rank > 0 ? json(r.launch.memory_per_rank) : json("auto")},
                 {"baseline", r.launch.baseline},
                 {"restarts", r.launch.restarts},
                 {"min_ranks", r.launch.min_ranks},
                 {"min_nodes", r.launch.min_nodes},
                 {"spare_nodes", r.launch.spare_nodes}};
  return j;
}

}  // namespace

std::string recipe_to_json(const Recipe& r) { return recipe_view(r).dump(2); }

}  // namespace dltune::recipes

namespace dltune::recipes {
namespace {

// A string that YAML would read as something else (a number, a boolean, null) is quoted.
bool reads_as_non_string(const std::string& s) {
  if (s.empty()) return true;
  static const char* const kWords[] = {"yes", "no",   "true", "false", "on",
                                       "off", "null", "~",    "y",     "n"};
  std::string lower;
  for (char c : s) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (const char* w : kWords) {
    if (lower == w) return true;
  }
  char* end = nullptr;
  (void)std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

void emit(YAML::Emitter& e, const nlohmann::ordered_json& j) {
  if (j.is_object()) {
    e << YAML::BeginMap;
    for (const auto& [k, v] : j.items()) {
      e << YAML::Key << k << YAML::Value;
      emit(e, v);
    }
    e << YAML::EndMap;
  } else if (j.is_array()) {
    const bool flat =
        std::all_of(j.begin(), j.end(), [](const auto& x) { return !x.is_structured(); });
    if (flat) e << YAML::Flow;
    e << YAML::BeginSeq;
    for (const auto& v : j) emit(e, v);
    e << YAML::EndSeq;
  } else if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (reads_as_non_string(s)) e << YAML::DoubleQuoted;
    e << s;
  } else if (j.is_null()) {
    e << YAML::Null;
  } else {
    e << j.dump();  // numbers and booleans in their shortest exact form
  }
}

}  // namespace

std::string recipe_to_yaml(const Recipe& r) {
  nlohmann::ordered_json v = recipe_view(r);
  // The node table of a built-in is long and the same for every recipe that names it: `dltune
  // model show` prints it. Layers and nodes the recipe wrote itself are shown.
  if (r.model.form == ModelForm::kBuiltin) {
    v["model"]["graph"] = std::to_string(r.model.graph.nodes.size()) +
                          " nodes (dltune model show " + r.model.builtin + " lists them)";
  }
  YAML::Emitter e;
  emit(e, v);
  return std::string(e.c_str()) + "\n";
}

}  // namespace dltune::recipes
