#include "planning/layout_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/strings.h"
#include "planning/model_costs.h"
#include "planning/step_time.h"
#include "recipes/model/partition.h"

namespace dltune::planning {
namespace {

// 3 x forward FLOPs per sample for each node (backward costs about twice the forward).
std::vector<double> flop_costs(const recipes::Graph& g) {
  auto costs = model_costs(g, "");
  std::vector<double> cost;
  if (!costs) return cost;  // the caller analysed the graph first
  for (double f : costs->flops) cost.push_back(3.0 * f);
  return cost;
}

// The values of an optional memory-saving setting (recomputation, offload) to try: the recipe's
// when it fixes one (`on` or "none"), else without it and then with it where it is possible.
std::vector<bool> off_then_on(const std::string& fixed, const char* on, bool possible) {
  if (fixed == on) return {true};
  if (fixed == "none" || !possible) return {false};
  return {false, true};
}

struct Attempt {
  bool fits = false;
  int64_t worst = 0;  // the largest stage's bytes (fitting or not)
  LayoutCandidate cand;
  std::string problem;
};

// What every phase of one search reads: the request, the graph and its analysis, the costs.
struct Search {
  const recipes::Graph& graph;
  const recipes::GraphInfo& info;
  const LayoutRequest& rq;
  std::vector<double> cost;      // per node, for one sample's forward + backward
  std::vector<double> per_call;  // per node, per call whatever its batch; empty: none
  double per_s = 0;              // cost units per second
  int cut_count = 0;             // the places the model can be cut
};

// The stage counts to try: those that divide the ranks and meet the recipe's fixed stages and
// mode (one only on the GPU engine). Error: invalid_input naming the mismatch when none does.
Result<std::vector<int>> stage_counts(const Search& s) {
  const LayoutRequest& rq = s.rq;
  const recipes::ParallelConfig& fx = rq.fixed;
  std::vector<int> stage_counts;
  for (int S = 1; S <= rq.ranks && S <= s.cut_count + 1 && (S == 1 || !rq.gpu); ++S) {
    if (rq.ranks % S != 0) continue;
    if (fx.stages > 0 && S != fx.stages) continue;
    if (fx.mode == "data" && S != 1) continue;
    if (fx.mode == "pipeline" && (S == 1 || S != rq.ranks)) continue;
    if (fx.mode == "hybrid" && (S == 1 || S == rq.ranks)) continue;
    stage_counts.push_back(S);
  }
  if (stage_counts.empty())
    return invalid_input("training.parallel: no layout of " + std::to_string(rq.ranks) +
                         " ranks matches mode '" + fx.mode + "'" +
                         (fx.stages > 0 ? " with " + std::to_string(fx.stages) + " stages" : "") +
                         " (stages must divide the ranks; the model has " +
                         std::to_string(s.cut_count) + " places to cut)");
  return stage_counts;
}

// Whether the stage of nodes [begin, end) of layout `l` (its recompute and offload set) fits
// the memory limit; always without a limit or with one stage.
bool stage_fits(const Search& s, const Layout& l, int begin, int end) {
  const LayoutRequest& rq = s.rq;
  const int S = l.stages;
  const int64_t replica_batch = l.replica_batch;
  const bool rc = l.recompute;
  if (rq.memory_limit <= 0 || S == 1) return true;
  auto st = recipes::make_stage(s.graph, s.info, begin, end);
  if (!st) return false;
  MemoryQuery q;
  const int64_t M = std::min<int64_t>(l.microbatches, replica_batch);
  q.microbatch = (replica_batch + M - 1) / M;
  q.local_batch = replica_batch;
  q.optimizer = rq.optimizer;
  q.recompute = rc;
  q.offload_optimizer = l.offload_optimizer;
  q.gpu = rq.gpu;
  q.in_flight = rc ? 1 : static_cast<int>(M);  // a stage's worst case (stage 0 under 1F1B
                                               // holds min(S, M)); checked exactly below
  if (!rc && l.schedule != recipes::PipelineSchedule::kGpipe)
    q.in_flight = static_cast<int>(std::min<int64_t>(S, M));
  q.boundary_in = begin > 0;
  q.boundary_out = end < static_cast<int>(s.graph.nodes.size());
  auto t = estimate_memory(st->graph, q, rq.buffers);
  return t && t->total() <= rq.memory_limit;
}

// The first node of each stage of `l` ({0} for one stage): cut for balance of `mb_cost` among
// the cuts whose stages fit; where none fits (or without a limit), for balance alone.
Result<std::vector<int>> stage_firsts(const Search& s, const Layout& l,
                                      const std::vector<double>& mb_cost) {
  if (l.stages <= 1) return std::vector<int>{0};
  auto p = recipes::balanced_partition(
      s.info, mb_cost, l.stages, [&](int begin, int end) { return stage_fits(s, l, begin, end); });
  if (p) return p;
  // No cut fits: measure the balanced cut anyway, to say by how much it misses.
  return recipes::balanced_partition(s.info, mb_cost, l.stages);
}

// The predicted step in seconds: the step-time model's, each stage's micro-batch in seconds
// (one more forward with recomputation), the largest stage's gradient allreduce among the R
// replicas, the optimizer update and the offloaded state's copies.
double predict_step(const Search& s, const Layout& l, int R, const std::vector<double>& mb_cost,
                    const std::vector<int>& firsts, const std::vector<StageMemory>& mem) {
  const LayoutRequest& rq = s.rq;
  const int64_t M = std::min<int64_t>(l.microbatches, l.replica_batch);
  PipelineStepInput in;
  in.microbatches = static_cast<int>(M);
  double grads = 0, update = 0, offloaded = 0;
  for (double c : stage_sums(mb_cost, firsts))
    in.stage_s.push_back(c * (l.recompute ? 4.0 / 3.0 : 1.0) / s.per_s);
  for (const StageMemory& sm : mem) {
    const MemoryTerms& t = sm.terms;
    grads = std::max(grads, static_cast<double>(t.gradients));
    update = std::max(update, static_cast<double>(t.parameters) / sizeof(float) *
                                  rq.optimizer_cost_per_parameter);
    offloaded = std::max(offloaded, static_cast<double>(t.offloaded));
  }
  in.update_s = update / s.per_s;
  in.allreduce_s = R > 1 ? 2.0 * grads * (R - 1) / R / rq.allreduce_bytes_per_s : 0.0;
  in.offload_s = 2.0 * offloaded / rq.host_copy_bytes_per_s;
  return pipeline_step_time(in).step_s;
}

// Appends the attempts for S stages to `attempts`: the variants cheapest first (as is,
// offloaded, recomputed, both), stopping at the first that fits. Errors: the partitioner's and
// the memory model's.
Status try_stages(const Search& s, int S, std::vector<Attempt>& attempts) {
  const LayoutRequest& rq = s.rq;
  const recipes::ParallelConfig& fx = rq.fixed;
  const int R = rq.ranks / S;
  const int64_t replica_batch =
      rq.batch_per_replica ? rq.global_batch : (rq.global_batch + R - 1) / R;
  const int64_t global = rq.batch_per_replica ? rq.global_batch * R : rq.global_batch;
  Layout l;
  l.replica_batch = replica_batch;
  l.stages = S;
  l.optimizer = rq.optimizer;
  l.gpu = rq.gpu;
  l.checkpoint_snapshot = rq.checkpoint_snapshot;
  l.microbatches = fx.microbatches > 0 ? static_cast<int>(fx.microbatches)
                                       : recipes::default_microbatches(S, replica_batch);
  l.schedule = recipes::parse_schedule(fx.schedule).value_or(recipes::PipelineSchedule::kOneFOneB);
  // What to try, cheapest first, until one fits: as is, offloaded, recomputed, both.
  std::vector<std::pair<bool, bool>> variants;  // (recompute, offload)
  for (bool rc : off_then_on(fx.recompute, "stage", S > 1))
    for (bool off : off_then_on(fx.offload, "optimizer", rq.gpu)) variants.push_back({rc, off});
  // Each node's cost for one micro-batch of this layout.
  const int64_t M = std::min<int64_t>(l.microbatches, replica_batch);
  const int64_t mb_samples = (replica_batch + M - 1) / M;
  std::vector<double> mb_cost(s.cost.size());
  for (size_t i = 0; i < s.cost.size(); ++i)
    mb_cost[i] =
        s.cost[i] * static_cast<double>(mb_samples) + (s.per_call.empty() ? 0.0 : s.per_call[i]);
  for (const auto& [rc, off] : variants) {
    l.recompute = rc;
    l.offload_optimizer = off;
    auto firsts = stage_firsts(s, l, mb_cost);
    if (!firsts) return firsts.error();
    if (S > 1) l.partition = recipes::partition_names(s.graph, *firsts);
    auto mem = layout_memory(s.graph, l, rq.buffers);
    if (!mem) return mem.error();
    Attempt a;
    a.worst = worst_total(*mem);
    a.fits = rq.memory_limit <= 0 || a.worst <= rq.memory_limit;
    const double step = predict_step(s, l, R, mb_cost, *firsts, *mem);
    LayoutCandidate& c = a.cand;
    c.layout.replicas = R;
    c.layout.stages = S;
    c.layout.partition = l.partition;
    c.layout.microbatches = static_cast<int>(M);
    c.layout.schedule = l.schedule;
    c.layout.recompute = rc ? recipes::Recompute::kStage : recipes::Recompute::kNone;
    c.layout.offload = off ? recipes::Offload::kOptimizer : recipes::Offload::kNone;
    c.layout.memory_bytes = a.worst;
    c.layout.predicted_sps = step > 0 ? static_cast<double>(global) / step : 0;
    c.stages = std::move(*mem);
    c.replica_batch = replica_batch;
    c.predicted_step_s = step;
    attempts.push_back(std::move(a));
    if (attempts.back().fits) break;  // offload and recomputation only where needed
  }
  return {};
}

// Orders the fitting candidates (best predicted throughput first; plain data parallelism first
// where the recipe leaves the layout open) and writes each one's reason. The step-time model's
// throughput only ranks the layouts: a reason gives it relative to the first's, never as samples/s
// of its own (issue 42: the launch's prediction, from the launch predictor with the plan's threads
// and sends, is the one throughput figure a person sees).
void rank_fitting(const Search& s, std::vector<LayoutCandidate>& out) {
  const LayoutRequest& rq = s.rq;
  const recipes::ParallelConfig& fx = rq.fixed;
  // By throughput, not step time: with the batch fixed per replica (weak scaling), layouts
  // with fewer replicas take fewer samples per step.
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) {
    return x.layout.predicted_sps > y.layout.predicted_sps;
  });
  // What the ranking rests on: FLOPs at an assumed rate only rank the layouts (a machine's real
  // rate is often several times higher); timed nodes are this machine's.
  const std::string model =
      "the step-time model" +
      (!rq.node_cost.empty() ? std::string(" from its nodes timed here")
       : rq.cost_per_second > 0
           ? std::string(" from the request's costs")
           : " from FLOPs at an assumed " +
                 std::to_string(static_cast<int>(kAssumedFlopsPerSecond / 1e9)) + " GFLOP/s");
  const double best = out.front().layout.predicted_sps;
  auto ratio = [](double a, double b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", b > 0 ? a / b : 0.0);
    return std::string(buf);
  };
  for (LayoutCandidate& c : out) {
    c.layout.reason = describe_layout(c.layout) + ": " + memory_text(c.layout.memory_bytes) +
                      " per rank" +
                      (rq.memory_limit > 0 ? " of " + memory_text(rq.memory_limit) : "");
    if (&c != &out.front()) {
      c.layout.reason += "; " + ratio(c.layout.predicted_sps, best) +
                         " the first-ranked layout's throughput by " + model;
    }
  }
  // Unmeasured, the model's ranking is a guess: where the recipe leaves the layout open and
  // plain data parallelism fits, it goes first (the trials measure the others).
  const bool open = fx.mode == "auto" && fx.stages == 0;
  auto dp =
      std::find_if(out.begin(), out.end(), [](const auto& c) { return c.layout.stages == 1; });
  if (open && dp != out.end() && dp != out.begin()) {
    const LayoutCandidate& ahead = out.front();
    const std::string rival = describe_layout(ahead.layout) + " " +
                              ratio(ahead.layout.predicted_sps, dp->layout.predicted_sps);
    std::rotate(out.begin(), dp, dp + 1);
    out.front().layout.reason = describe_layout(out.front().layout) + ": " +
                                memory_text(out.front().layout.memory_bytes) + " per rank" +
                                (rq.memory_limit > 0 ? " of " + memory_text(rq.memory_limit) : "") +
                                "; data parallelism fits: preferred until measured (" + model +
                                " puts " + rival + " ahead)";
  } else if (out.size() > 1) {
    out.front().layout.reason += "; the fastest of " + std::to_string(out.size()) +
                                 " layouts that fit by " + model + " (the next, " +
                                 describe_layout(out[1].layout) + ", at " +
                                 ratio(out[1].layout.predicted_sps, best) + ")";
  } else if (out.front().layout.stages > 1) {
    out.front().layout.reason +=
        open ? "; the only layout that fits (its stages balanced by " + model + ")"
             : "; its stages balanced by " + model;
  }
}

// The most samples per replica that would fit the layout of `best` (the memory grows with the
// batch): by bisection over the model itself. 0: not even one sample.
int64_t largest_fitting_batch(const Search& s, const Attempt& best) {
  const recipes::ParallelLayout& bl = best.cand.layout;
  Layout l;
  l.stages = bl.stages;
  l.partition = bl.partition;
  l.microbatches = bl.microbatches;
  l.schedule = bl.schedule;
  l.recompute = bl.recompute == recipes::Recompute::kStage;
  l.offload_optimizer = bl.offload == recipes::Offload::kOptimizer;
  l.optimizer = s.rq.optimizer;
  l.gpu = s.rq.gpu;
  l.checkpoint_snapshot = s.rq.checkpoint_snapshot;
  int64_t lo = 0, hi = best.cand.replica_batch;  // lo fits (0: nothing), hi does not
  while (hi - lo > 1) {
    l.replica_batch = lo + (hi - lo) / 2;
    auto m = layout_memory(s.graph, l, s.rq.buffers);
    if (m && worst_total(*m) <= s.rq.memory_limit)
      lo = l.replica_batch;
    else
      hi = l.replica_batch;
  }
  return lo;
}

// The error when no attempt fits: the closest miss, by how much it misses, and what would fit.
Error nothing_fits(const Search& s, const std::vector<Attempt>& attempts) {
  const LayoutRequest& rq = s.rq;
  const recipes::ParallelConfig& fx = rq.fixed;
  const Attempt* best = &attempts.front();
  for (const Attempt& a : attempts)
    if (a.worst < best->worst) best = &a;
  const recipes::ParallelLayout& bl = best->cand.layout;
  int worst_stage = 0;
  worst_total(best->cand.stages, &worst_stage);
  const MemoryTerms& t = best->cand.stages[static_cast<size_t>(worst_stage)].terms;
  const double fixed = static_cast<double>(t.parameters + t.gradients + t.optimizer + t.state);
  const int64_t fit_batch = largest_fitting_batch(s, *best);
  std::string what = "no layout of " + std::to_string(rq.ranks) + " ranks fits " +
                     memory_text(rq.memory_limit) + " per rank: the smallest, " +
                     describe_layout(bl) + ", needs " + memory_text(best->worst) + " on stage " +
                     std::to_string(worst_stage) + " (" + terms_text(t) + "), " +
                     memory_text(best->worst - rq.memory_limit) + " too much. What would fit: ";
  std::vector<std::string> fixes;
  if (fit_batch >= 1)
    fixes.push_back("at most " + std::to_string(fit_batch) + " samples per replica (now " +
                    std::to_string(best->cand.replica_batch) + ")");
  else
    fixes.push_back("no batch size (the parameters and optimizer state alone need " +
                    memory_text(static_cast<int64_t>(fixed)) + ")");
  if (rq.gpu)  // no stages on the GPU engine yet, so no recomputation either (per stage)
    fixes.push_back(
        "the CPU engine (comm.backend auto or mpi), whose pipeline stages hold "
        "fewer parameters each");
  else if (fx.stages > 0 || fx.mode == "data")
    fixes.push_back("training.parallel stages auto (more stages hold fewer parameters each)");
  else if (rq.ranks <= s.cut_count)
    fixes.push_back("more ranks (more pipeline stages)");
  if (fx.recompute == "none" && !rq.gpu)
    fixes.push_back("training.parallel.recompute auto or stage");
  if (rq.gpu && fx.offload == "none")
    fixes.push_back("training.parallel.offload auto or optimizer (the optimizer state, " +
                    memory_text(t.optimizer) + ", to host memory)");
  fixes.push_back("a larger launch.memory_per_rank");
  return invalid_input(what + strings::join(fixes, "; or "));
}

}  // namespace

std::vector<size_t> layouts_to_measure(const std::vector<LayoutCandidate>& candidates) {
  double best = 0;
  for (const LayoutCandidate& c : candidates) best = std::max(best, c.layout.predicted_sps);
  std::vector<size_t> out;
  size_t pipelines = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const recipes::ParallelLayout& l = candidates[i].layout;
    if (!l.pipelined()) {
      out.push_back(i);
    } else if (pipelines < kMeasuredPipelines && l.predicted_sps >= kPromisingShare * best) {
      out.push_back(i);
      ++pipelines;
    }
  }
  return out;
}

std::string describe_layout(const recipes::ParallelLayout& l) {
  std::string s = std::to_string(l.replicas) + (l.replicas == 1 ? " replica x " : " replicas x ") +
                  std::to_string(l.stages) + (l.stages == 1 ? " stage" : " stages");
  if (l.stages > 1)
    s += " (from " + strings::join(l.partition, ", ") + "), " + std::to_string(l.microbatches) +
         " micro-batches, " + std::string(recipes::schedule_name(l.schedule)) +
         (l.recompute == recipes::Recompute::kStage ? ", recompute" : "");
  else if (l.microbatches > 1)
    s += ", " + std::to_string(l.microbatches) + " micro-batches";
  if (l.offload == recipes::Offload::kOptimizer) s += ", optimizer state in host memory";
  return s;
}

Result<std::vector<LayoutCandidate>> layout_candidates(const recipes::Graph& graph,
                                                       const LayoutRequest& rq) {
  const recipes::GraphInfo info = recipes::analyze_graph(graph);
  if (!info.ok()) return invalid_input("the model graph: " + info.problems.front().second);
  if (rq.ranks < 1 || rq.global_batch < 1)
    return invalid_input("a layout needs at least one rank and one sample per step");
  if (!rq.buffers) return internal_error("layout_candidates: no executor buffers given");
  Search s{graph, info, rq, {}, {}, 0, 0};
  s.cost = rq.node_cost.size() == graph.nodes.size() ? rq.node_cost : flop_costs(graph);
  s.per_s = rq.cost_per_second > 0 ? rq.cost_per_second : kAssumedFlopsPerSecond;
  if (rq.node_fixed_cost.size() == s.cost.size()) s.per_call = rq.node_fixed_cost;
  s.cut_count = static_cast<int>(recipes::cut_points(info).size());
  const recipes::ParallelConfig& fx = rq.fixed;
  // The GPU engine runs no pipeline stages yet (recipe_validate.cc refuses them fixed): data
  // parallelism only, its state offloaded where memory is short.
  if (rq.gpu && (fx.stages > 1 || fx.mode == "pipeline" || fx.mode == "hybrid"))
    return invalid_input(
        "training.parallel: pipeline stages run on the CPU engine only for now; "
        "the GPU engine (comm.backend nccl) trains data parallel, with "
        "training.parallel.offload where the memory is short");
  auto counts = stage_counts(s);
  if (!counts) return counts.error();
  std::vector<Attempt> attempts;
  for (int S : *counts)
    if (Status st = try_stages(s, S, attempts); !st) return st.error();
  std::vector<LayoutCandidate> out;
  for (Attempt& a : attempts)
    if (a.fits) out.push_back(std::move(a.cand));
  if (out.empty()) return nothing_fits(s, attempts);
  rank_fitting(s, out);
  return out;
}

}  // namespace dltune::planning
