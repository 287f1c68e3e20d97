#include "launcher/flow/launch_layout.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/json_input.h"
#include "common/paths.h"
#include "common/rss.h"
#include "common/strings.h"
#include "engine/graph/batch_buffers.h"
#include "launcher/backend/rank_program.h"
#include "launcher/backend/temp_dir.h"
#include "planning/node_costs.h"
#include "recipes/model/builtins.h"

namespace dltune::launcher {
namespace {

// What the query searches over: the recipe (or a built-in model as a bare recipe).
Result<recipes::Recipe> target_of(const LayoutQuery& q) {
  if (!q.recipe_path.empty()) return recipes::load_recipe(q.recipe_path);
  if (q.model.empty()) return invalid_input("a layout query needs a recipe or a built-in model");
  recipes::BuiltinOptions bo;
  for (const std::string& part : strings::split(q.input, ',')) {
    auto v = strings::parse_int(part);
    if (!q.input.empty() && (!v || *v < 1 || *v > (int64_t{1} << 20)))
      return invalid_input("--input: expected sizes such as 3,224,224, got '" + q.input + "'");
    if (v) bo.input.push_back(*v);
  }
  auto g = recipes::builtin_graph(q.model, bo);
  if (!g) return not_found("'" + q.model + "' is not a built-in model");
  recipes::Recipe r;
  r.model.graph = std::move(*g);
  return r;
}

// GPU 0's memory as a rank's process sees it (the worker asks CUDA: this process links none).
planning::GpuMemoryFn gpu_memory_of(const std::string& worker) {
  return [worker]() -> Result<uint64_t> {
    if (worker.empty()) return unsupported("no dltune-worker to ask the GPU");
    auto j = ask_worker(worker, {"--device-memory"});
    if (!j) return j.error();
    const auto it = j->find("device_memory_bytes");
    if (it == j->end() || !it->is_number_unsigned())
      return internal_error("dltune-worker profile --device-memory: no device_memory_bytes");
    return it->get<uint64_t>();
  };
}

// The search's request for `q` on `r` (without costs), and where its memory limit comes from.
Result<planning::LayoutRequest> request_of(const LayoutQuery& q, const recipes::Recipe& r,
                                           std::string* memory_source) {
  const recipes::TrainingConfig& t = r.training;
  planning::LayoutRequest rq;
  rq.buffers = engine::batch_buffers;
  rq.ranks = q.ranks;
  rq.fixed = t.parallel;
  rq.gpu = r.comm.backend == "nccl";
  rq.checkpoint_snapshot = q.model.empty();  // a recipe's launch checkpoints; `model show` asks
  if (q.stages > 0) rq.fixed.stages = q.stages;
  if (q.microbatches > 0) rq.fixed.microbatches = q.microbatches;
  if (!q.schedule.empty()) {
    if (!recipes::parse_schedule(q.schedule))
      return invalid_input("--schedule: expected gpipe, 1f1b or async, got '" + q.schedule + "'");
    rq.fixed.schedule = q.schedule;
  }
  if (!q.recompute.empty()) {
    if (!recipes::parse_recompute(q.recompute))
      return invalid_input("--recompute: expected none or stage, got '" + q.recompute + "'");
    rq.fixed.recompute = q.recompute;
  }
  if (!q.offload.empty()) {
    if (!recipes::parse_offload(q.offload))
      return invalid_input("--offload: expected none or optimizer, got '" + q.offload + "'");
    rq.fixed.offload = q.offload;
  }
  rq.optimizer = q.optimizer.empty() ? t.optimizer.kind : q.optimizer;
  if (rq.optimizer != "sgd" && rq.optimizer != "adamw")
    return invalid_input("--optimizer: expected sgd or adamw, got '" + rq.optimizer + "'");
  if (q.batch > 0) {
    rq.global_batch = q.batch;
    rq.batch_per_replica = q.per_replica;
  } else if (t.per_rank_batch > 0) {
    rq.global_batch = t.per_rank_batch;
    rq.batch_per_replica = true;
  } else if (t.global_batch > 0) {
    rq.global_batch = t.global_batch;
  } else {
    rq.global_batch = 32;  // the tuner's smallest per-replica batch
    rq.batch_per_replica = true;
  }
  if (q.unlimited) {
    *memory_source = "--unlimited";
  } else {
    const planning::RankMemoryLimit m = planning::rank_memory_limit(
        r, q.ranks_per_node > 0 ? q.ranks_per_node : q.ranks, gpu_memory_of(q.worker));
    rq.memory_limit = m.bytes;
    *memory_source = m.source;
  }
  return rq;
}

// Each node's cost timed by the worker around `replica_batch` samples (planning/node_costs.h),
// into `rq`; the answer's "costs" says what was used. The whole model must fit one process:
// when its data-parallel memory at the larger timed batch is over half of what this process
// may use, the costs stay FLOPs and `costs` says why.
void measure_costs(const LayoutQuery& q, const recipes::Graph& graph, int64_t replica_batch,
                   planning::LayoutRequest* rq, std::string* costs) {
  if (!q.model.empty() && !q.input.empty()) {
    *costs = "FLOPs (--measure times a built-in model at its own input only)";
    return;
  }
  planning::Layout whole;
  whole.replica_batch = std::max<int64_t>(1, std::min<int64_t>(replica_batch, 64));
  auto mem = planning::layout_memory(graph, whole, rq->buffers);
  if (!mem || planning::worst_total(*mem) > rss::memory_limit_bytes() / 2) {
    *costs = "FLOPs (the whole model needs " +
             (mem ? strings::format_bytes(static_cast<uint64_t>(planning::worst_total(*mem)))
                  : std::string("more memory than it can tell")) +
             " at batch " + std::to_string(whole.replica_batch) +
             ", too much to time it in one process here)";
    return;
  }
  std::vector<std::string> args = {"--fit", "--batch", std::to_string(replica_batch)};
  if (q.model.empty())
    args.insert(args.end(), {"--recipe", q.recipe_path});
  else
    args.insert(args.end(), {"--model", q.model});
  auto j = q.worker.empty() ? Result<nlohmann::json>(unsupported("no dltune-worker"))
                            : ask_worker(q.worker, args);
  auto c = j ? planning::node_costs_from_json(*j) : Result<planning::NodeCosts>(j.error());
  if (c && c->per_sample.size() != graph.nodes.size())
    c = internal_error("the timed nodes are not the model graph's");
  if (!c) {
    *costs = "FLOPs (timing the model failed: " + c.error().message() + ")";
    return;
  }
  rq->node_cost = c->per_sample;
  rq->node_fixed_cost = c->per_call;
  rq->optimizer_cost_per_parameter = c->optimizer_per_parameter;
  rq->cost_per_second = 1.0;
  *costs = "measured here (batches " + std::to_string(c->small_batch) + " and " +
           std::to_string(c->large_batch) + ", one thread)";
}

Result<LayoutAnswer> search(const recipes::Graph& graph, const planning::LayoutRequest& rq,
                            LayoutAnswer base) {
  auto cands = planning::layout_candidates(graph, rq);
  if (!cands) return cands.error();
  base.candidates = std::move(*cands);
  base.to_measure = planning::layouts_to_measure(base.candidates);
  return base;
}

}  // namespace

Result<nlohmann::json> ask_worker(const std::string& worker, std::vector<std::string> args) {
  auto tmp = TempDir::create_in_tmp("dltune-layout");
  if (!tmp) return tmp.error();
  const std::string out = tmp->path() + "/answer.json";
  args.insert(args.begin(), {worker, "profile"});
  args.insert(args.end(), {"--out", out});
  auto rc = cli::run_to_completion(args, "layout");
  if (!rc) return rc.error();
  auto text = paths::read_file(out);
  if (!text)
    return internal_error("dltune-worker profile ended with code " + std::to_string(*rc) +
                          " and wrote no answer");
  auto j = parse_json_bounded(*text, {.max_bytes = 16 << 20, .max_depth = 8});
  if (!j) return j.error().wrap("dltune-worker profile's answer");
  const auto error = j->find("error");
  if (error != j->end() || *rc != 0) {
    const std::string msg = error != j->end() && error->is_string()
                                ? error->get<std::string>()
                                : "dltune-worker profile ended with code " + std::to_string(*rc);
    return *rc == 2 ? invalid_input(msg) : peer_failed(msg);
  }
  return j;
}

Result<LayoutAnswer> query_layouts(const LayoutQuery& q) {
  auto r = target_of(q);
  if (!r) return r.error();
  LayoutAnswer base;
  auto rq = request_of(q, *r, &base.memory_source);
  if (!rq) return rq.error();
  base.memory_limit = rq->memory_limit;
  auto flops = search(r->model.graph, *rq, base);
  if (!flops || q.measure == LayoutQuery::Measure::kNever) return flops;
  const auto& c = flops->candidates;
  const bool pipelines =
      std::any_of(c.begin(), c.end(), [](const auto& k) { return k.layout.stages > 1; });
  const bool data =
      std::any_of(c.begin(), c.end(), [](const auto& k) { return k.layout.stages == 1; });
  // A pipeline's cuts are placed by the costs too, so a lone pipeline is timed as well: its
  // stages balanced by time, its throughput predicted from this machine's.
  if (!pipelines) return flops;
  if (q.measure == LayoutQuery::Measure::kForChoice && data) return flops;
  const int R = std::max(1, q.ranks);  // the largest replica batch: data parallelism's
  const int64_t replica = rq->batch_per_replica ? rq->global_batch : (rq->global_batch + R - 1) / R;
  measure_costs(q, r->model.graph, replica, &*rq, &base.costs);
  return search(r->model.graph, *rq, base);
}

TrialLayouts tuning_layouts(const LayoutAnswer& answer) {
  TrialLayouts out;
  out.data_parallel_fits = false;
  for (size_t i = 0; i < answer.candidates.size(); ++i) {
    const recipes::ParallelLayout& l = answer.candidates[i].layout;
    // Data parallelism that fits only with the optimizer state offloaded (GPU) is a layout
    // of its own: plain data parallelism does not fit.
    const bool offloaded = l.offload != recipes::Offload::kNone;
    if (!l.pipelined() && !offloaded) out.data_parallel_fits = true;
    const bool measure =
        std::find(answer.to_measure.begin(), answer.to_measure.end(), i) != answer.to_measure.end();
    if ((l.pipelined() || offloaded) && measure) out.layouts.push_back(l);
  }
  return out;
}

Status apply_layout(const LayoutQuery& base, recipes::Plan* plan) {
  if (plan->parallel.stages > 1) return ok_status();
  recipes::TrainingPlan& t = plan->training;
  LayoutQuery q = base;
  q.per_replica = t.scaling == recipes::Scaling::kWeak;
  q.batch = q.per_replica ? t.per_rank_batch : t.global_batch;
  auto a = query_layouts(q);
  if (!a) return a.error();
  const recipes::ParallelLayout& p = a->candidates.front().layout;
  if (p.stages == 1) {  // data parallel: keep the plan's batch; record the memory
    plan->parallel.microbatches = p.microbatches;
    plan->parallel.offload = p.offload;
    plan->parallel.memory_bytes = p.memory_bytes;
    plan->parallel.reason = p.reason;
    return recipes::validate_plan(*plan);
  }
  plan->parallel = p;
  if (q.per_replica)
    t.global_batch = t.per_rank_batch * p.replicas;
  else
    t.per_rank_batch = (t.global_batch + p.replicas - 1) / p.replicas;
  return recipes::validate_plan(*plan);
}

nlohmann::json candidate_json(const planning::LayoutCandidate& c) {
  recipes::Plan plan;
  plan.parallel = c.layout;
  nlohmann::json stages = nlohmann::json::array();
  for (const planning::StageMemory& s : c.stages)
    stages.push_back({{"first_node", s.first_node}, {"terms", planning::memory_json(s.terms)}});
  return {{"layout", recipes::plan_to_json(plan)["parallel"]},
          {"replica_batch", c.replica_batch},
          {"stages", stages}};
}

}  // namespace dltune::launcher
