#include "engine/worker/layout.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "common/rss.h"
#include "common/strings.h"
#include "engine/train/layout_search.h"
#include "engine/worker/profile.h"
#include "recipes/model/builtins.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::engine {
namespace {

struct LayoutOptions {
  std::string recipe, model, input, out, optimizer, schedule, recompute, offload;
  int stages = 0, microbatches = 0;
  int ranks = 1, ranks_per_node = 0;
  int64_t batch = 0, memory = 0;
  bool per_replica = false, unlimited = false, measure = false;
};
LayoutOptions g_layout;

// Per-node costs measured on this process (--measure, engine/train/node_costs.h). The whole
// model must fit on this process: when its data-parallel memory at the larger timed batch is
// over half of what the process may use, the costs stay FLOPs and `source` says why.
struct Costs {
  NodeCosts measured;  // empty: FLOPs
  std::string source = "FLOPs";
};

Costs measured_costs(const LayoutOptions& o, const recipes::Graph& graph, int64_t replica_batch) {
  Costs c;
  if (!o.model.empty() && !o.input.empty()) {
    c.source = "FLOPs (--measure times a built-in model at its own input only)";
    return c;
  }
  Layout whole;
  whole.replica_batch = std::max<int64_t>(1, std::min<int64_t>(replica_batch, 64));
  auto mem = layout_memory(graph, whole);
  if (!mem || worst_total(*mem) > rss::memory_limit_bytes() / 2) {
    c.source = "FLOPs (the whole model needs " +
               (mem ? strings::format_bytes(static_cast<uint64_t>(worst_total(*mem)))
                    : std::string("more memory than it can tell")) +
               " at batch " + std::to_string(whole.replica_batch) +
               ", too much to time it in one process here)";
    return c;
  }
  auto cfg = profile_config(o.model, o.recipe, static_cast<int>(whole.replica_batch));
  auto costs =
      cfg ? measure_node_costs(*cfg, graph, replica_batch) : Result<NodeCosts>(cfg.error());
  if (!costs) {
    c.source = "FLOPs (timing the model failed: " + costs.error().message() + ")";
    return c;
  }
  c.measured = std::move(*costs);
  c.source = "measured here (batches " + std::to_string(c.measured.small_batch) + " and " +
             std::to_string(c.measured.large_batch) + ", one thread)";
  return c;
}

nlohmann::json layout_json(const LayoutCandidate& c) {
  const recipes::ParallelLayout& l = c.layout;
  nlohmann::json stages = nlohmann::json::array();
  for (const StageMemory& s : c.stages)
    stages.push_back({{"first_node", s.first_node}, {"terms", memory_json(s.terms)}});
  return {{"layout",
           {{"replicas", l.replicas},
            {"stages", l.stages},
            {"partition", l.partition},
            {"microbatches", l.microbatches},
            {"schedule", recipes::schedule_name(l.schedule)},
            {"recompute", recipes::recompute_name(l.recompute)},
            {"offload", recipes::offload_name(l.offload)},
            {"reason", l.reason},
            {"memory_bytes", l.memory_bytes},
            {"predicted_sps", l.predicted_sps}}},
          {"replica_batch", c.replica_batch},
          {"stages", stages}};
}

}  // namespace

CLI::App* add_layout_command(CLI::App& app) {
  LayoutOptions& o = g_layout;
  auto* cmd = app.add_subcommand("layout", "the layouts a recipe fits on a job (memory model)");
  auto* recipe = cmd->add_option("--recipe", o.recipe, "recipe file");
  auto* model = cmd->add_option("--model", o.model, "a built-in model instead of a recipe");
  recipe->excludes(model);
  cmd->add_option("--input", o.input, "--model's input, e.g. 3,32,32 (default: its own)");
  cmd->add_option("--stages", o.stages, "fixed stage count (default: the recipe's, else auto)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--microbatches", o.microbatches, "fixed micro-batches")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--schedule", o.schedule, "gpipe | 1f1b | async");
  cmd->add_option("--recompute", o.recompute, "none | stage");
  cmd->add_option("--offload", o.offload, "none | optimizer (GPU: the optimizer state in host)");
  cmd->add_option("--optimizer", o.optimizer, "sgd | adamw (default: the recipe's, else sgd)");
  cmd->add_option("--ranks", o.ranks, "ranks of the job")
      ->required()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--ranks-per-node", o.ranks_per_node, "ranks sharing a node's memory (auto)");
  cmd->add_option("--batch", o.batch, "samples per step (default: the recipe's)");
  cmd->add_flag("--per-replica", o.per_replica, "--batch is per replica (weak scaling)");
  cmd->add_option("--memory", o.memory, "bytes per rank (default: the recipe's, else auto)");
  cmd->add_flag("--unlimited", o.unlimited, "no memory limit: report every layout's terms");
  cmd->add_flag("--measure", o.measure,
                "time the model's nodes here for the cuts and predictions (default: FLOPs)");
  cmd->add_option("--out", o.out, "write the JSON here")->required();
  return cmd;
}

int run_layout_command() {
  const LayoutOptions& o = g_layout;
  auto fail = [&](const Error& e) {
    nlohmann::json j = {{"error", e.message()}};
    if (!paths::write_file_atomic(o.out, j.dump() + "\n"))  // else the caller tells it
      std::fprintf(stderr, "dltune-worker layout: %s\n", e.message().c_str());
    return e.exit_code();
  };
  recipes::Recipe r;
  if (!o.recipe.empty()) {
    auto loaded = recipes::load_recipe(o.recipe);
    if (!loaded) return fail(loaded.error());
    r = std::move(*loaded);
  } else if (!o.model.empty()) {
    recipes::BuiltinOptions bo;
    for (const std::string& part : strings::split(o.input, ',')) {
      auto v = strings::parse_int(part);
      if (!o.input.empty() && (!v || *v < 1 || *v > (int64_t{1} << 20)))
        return fail(
            invalid_input("--input: expected sizes such as 3,224,224, got '" + o.input + "'"));
      if (v) bo.input.push_back(*v);
    }
    auto g = recipes::builtin_graph(o.model, bo);
    if (!g) return fail(not_found("'" + o.model + "' is not a built-in model"));
    r.model.graph = std::move(*g);
  } else {
    return fail(invalid_input("give --recipe or --model"));
  }
  const recipes::TrainingConfig& t = r.training;
  LayoutRequest rq;
  rq.ranks = o.ranks;
  rq.fixed = t.parallel;
  rq.gpu = r.comm.backend == "nccl";
  if (o.stages > 0) rq.fixed.stages = o.stages;
  if (o.microbatches > 0) rq.fixed.microbatches = o.microbatches;
  if (!o.schedule.empty()) {
    if (!recipes::parse_schedule(o.schedule))
      return fail(
          invalid_input("--schedule: expected gpipe, 1f1b or async, got '" + o.schedule + "'"));
    rq.fixed.schedule = o.schedule;
  }
  if (!o.recompute.empty()) {
    if (!recipes::parse_recompute(o.recompute))
      return fail(invalid_input("--recompute: expected none or stage, got '" + o.recompute + "'"));
    rq.fixed.recompute = o.recompute;
  }
  if (!o.offload.empty()) {
    if (!recipes::parse_offload(o.offload))
      return fail(invalid_input("--offload: expected none or optimizer, got '" + o.offload + "'"));
    rq.fixed.offload = o.offload;
  }
  rq.optimizer = o.optimizer.empty() ? t.optimizer.kind : o.optimizer;
  if (rq.optimizer != "sgd" && rq.optimizer != "adamw")
    return fail(invalid_input("--optimizer: expected sgd or adamw, got '" + rq.optimizer + "'"));
  if (o.batch > 0) {
    rq.global_batch = o.batch;
    rq.batch_per_replica = o.per_replica;
  } else if (t.per_rank_batch > 0) {
    rq.global_batch = t.per_rank_batch;
    rq.batch_per_replica = true;
  } else if (t.global_batch > 0) {
    rq.global_batch = t.global_batch;
  } else {
    rq.global_batch = 32;  // the tuner's smallest per-replica batch
    rq.batch_per_replica = true;
  }
  std::string source = "--memory";
  rq.memory_limit = o.memory;
  if (o.unlimited) {
    rq.memory_limit = 0;
    source = "--unlimited";
  } else if (rq.memory_limit <= 0) {
    const RankMemoryLimit m =
        rank_memory_limit(r, o.ranks_per_node > 0 ? o.ranks_per_node : o.ranks);
    rq.memory_limit = m.bytes;
    source = m.source;
  }
  Costs costs;
  if (o.measure) {
    const int R = std::max(1, o.ranks);  // the largest replica batch: data parallelism's
    const int64_t replica = rq.batch_per_replica ? rq.global_batch : (rq.global_batch + R - 1) / R;
    costs = measured_costs(o, r.model.graph, replica);
    rq.node_cost = costs.measured.per_sample;
    rq.node_fixed_cost = costs.measured.per_call;
    rq.optimizer_cost_per_parameter = costs.measured.optimizer_per_parameter;
    if (!rq.node_cost.empty()) rq.cost_per_second = 1.0;
  }
  auto cands = layout_candidates(r.model.graph, rq);
  if (!cands) return fail(cands.error());
  nlohmann::json out = {{"ranks", o.ranks},
                        {"memory_limit", rq.memory_limit},
                        {"memory_source", source},
                        {"costs", costs.source},
                        {"candidates", nlohmann::json::array()}};
  const std::vector<size_t> measured = layouts_to_measure(*cands);
  for (size_t i = 0; i < cands->size(); ++i) {
    nlohmann::json c = layout_json((*cands)[i]);
    c["measure"] = std::find(measured.begin(), measured.end(), i) != measured.end();
    out["candidates"].push_back(std::move(c));
  }
  if (Status st = paths::write_file_atomic(o.out, out.dump(2) + "\n"); !st) return fail(st.error());
  return 0;
}

}  // namespace dltune::engine
