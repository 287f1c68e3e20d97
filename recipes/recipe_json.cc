// The normalised JSON view of a Recipe (`dltune recipe show`): every default filled in.
#include <nlohmann/json.hpp>

#include "recipes/recipe.h"

namespace dltune::recipes {
namespace {

using nlohmann::json;

json model_json(const Recipe& r) {
  const GraphInfo info = analyze_graph(r.model.graph);
  const char* forms[] = {"builtin", "layers", "nodes"};
  json j = {{"form", forms[static_cast<int>(r.model.form)]},
            {"builtin", r.model.builtin},
            {"dtype", r.model.dtype},
            {"input", r.model.input},
            {"graph", graph_to_json(r.model.graph)},
            {"parameters", info.parameters},
            {"flops_per_sample", info.flops_per_sample}};
  return j;
}

json training_json(const TrainingConfig& t) {
  const OptimizerConfig& o = t.optimizer;
  const ScheduleConfig& s = t.schedule;
  auto auto_or = [](int64_t v) { return v > 0 ? json(v) : json("auto"); };
  return {{"epochs", t.epochs},
          {"steps", t.steps},
          {"batch",
           {{"per_rank", auto_or(t.per_rank_batch)},
            {"global", auto_or(t.global_batch)},
            {"max_global", t.max_global_batch > 0 ? json(t.max_global_batch) : json(nullptr)}}},
          {"scaling", scaling_name(t.scaling)},
          {"optimizer",
           {{"kind", o.kind},
            {"lr", o.lr},
            {"momentum", o.momentum},
            {"weight_decay", o.weight_decay},
            {"lr_reference_batch", auto_or(o.lr_reference_batch)},
            {"lr_scaling", lr_scaling_name(o.lr_scaling)},
            {"betas", {o.beta1, o.beta2}},
            {"eps", o.eps},
            {"clip_grad_norm", o.clip_grad_norm}}},
          {"schedule",
           {{"kind", schedule_kind_name(s.kind)},
            {"warmup_steps", s.warmup_steps},
            {"step_size", s.step_size},
            {"gamma", s.gamma},
            {"min_lr", s.min_lr}}},
          {"checkpoint_every", t.checkpoint_every},
          {"seed", t.seed},
          {"init_from", t.init_from},
          {"parallel",
           {{"mode", t.parallel.mode},
            {"stages", auto_or(t.parallel.stages)},
            {"microbatches", auto_or(t.parallel.microbatches)},
            {"schedule", t.parallel.schedule},
            {"recompute", t.parallel.recompute}}}};
}

}  // namespace

std::string recipe_to_json(const Recipe& r) {
  const char* overlap[] = {"auto", "on", "off"};
  json j = {
      {"name", r.name},
      {"description", r.description},
      {"source_path", r.source_path},
      {"signature", recipe_signature(r)},
      {"model", model_json(r)},
      {"data",
       {{"kind", data_kind_name(r.data.kind)},
        {"path", r.data.path},
        {"shape", r.data.shape},
        {"classes", r.data.classes},
        {"samples", r.data.samples},
        {"context", r.data.context},
        {"heldout", r.data.heldout_test_files ? json("test") : json(r.data.heldout_fraction)}}},
      {"training", training_json(r.training)},
      {"comm",
       {{"backend", r.comm.backend},
        {"allreduce", r.comm.allreduce ? algorithm_name(*r.comm.allreduce) : "auto"},
        {"bucket", r.comm.bucket_bytes > 0 ? json(r.comm.bucket_bytes) : json("auto")},
        {"overlap", overlap[static_cast<int>(r.comm.overlap)]}}},
      {"tune",
       {{"budget", r.tune.budget_seconds},
        {"objective",
         r.tune.objective == Objective::kThroughput ? "throughput" : "time-to-accuracy"},
        {"target_accuracy", r.tune.target_accuracy}}},
      {"launch",
       {{"ranks", r.launch.ranks > 0 ? json(r.launch.ranks) : json("auto")},
        {"ranks_per_node",
         r.launch.ranks_per_node > 0 ? json(r.launch.ranks_per_node) : json("auto")},
        {"binding", r.launch.binding},
        {"memory_per_rank",
         r.launch.memory_per_rank > 0 ? json(r.launch.memory_per_rank) : json("auto")}}},
  };
  return j.dump(2);
}

}  // namespace dltune::recipes
