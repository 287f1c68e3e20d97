// bench/parallel: pipelines, layouts and the memory model on this machine (ranks as threads of
// one process, comm::spawn, as the equivalence tests run them, one BLAS thread each as
// dltune-worker's ranks; rounds interleaved so a load that drifts weighs on every side alike).
//
// 1. fits_only_pipelined: a deep MLP whose data-parallel footprint on 2 ranks exceeds a
//    memory_per_rank that its 2-stage pipeline fits (the limit halfway between the two
//    estimates): the layout search must pick the pipeline, and it must train. 1 or 0.
// 2. bubble_vs_theory: a balanced MLP on S = 2 stages, M = 8 micro-batches, 1F1B; each stage's
//    idle fraction of the schedule's time (1 - forward/backward seconds over the pipelined
//    part's seconds), the least idle stage's (the bottleneck's) against (S-1)/(M+S-1). Goal
//    <= 1.15.
// 3. layout_vs_exhaustive: for 2 and 4 ranks, every layout of the MLP measured (samples/s), the
//    tuner's choice (the fastest of the layouts its trials measure: data parallelism and the
//    pipelines the timed costs predict within 0.75x of the best) against the best measured; the
//    worse of the two. Goal >= 0.95.
// 4. async_vs_1f1b: an MLP whose first stage is 3x the second's, 2 stages, 8 micro-batches:
//    1F1B's step time over the asynchronous schedule's (> 1: async faster).
// 5. mem_err_max: processes (dltune run + dltune-worker train: the resident set is per
//    process): for data parallelism on 1 and 2 ranks and 2-stage pipelines (1F1B, GPipe,
//    recomputation), the memory model's estimate against each rank's measured peak above its
//    start, the largest relative error. Goal <= 0.15.
//
//   dltune-bench-parallel [--dltune PATH] [--steps N] [--rounds R] [--parts a,b,...]
// Last line: summary: fits_only_pipelined=N bubble_vs_theory=F layout_vs_exhaustive=F
//            async_vs_1f1b=F mem_err_max=F  (na for a part not run)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "comm/thread_communicator.h"
#include "common/paths.h"
#include "common/strings.h"
#include "engine/core/tensor.h"
#include "engine/data/dataset.h"
#include "engine/graph/batch_buffers.h"
#include "engine/train/node_costs.h"
#include "engine/train/trainer.h"
#include "planning/layout_search.h"
#include "recipes/plan.h"

namespace dltune::engine {
namespace {

using planning::describe_layout;
using planning::LayoutCandidate;
using planning::LayoutRequest;
using planning::layouts_to_measure;
using planning::NodeCosts;

using Clock = std::chrono::steady_clock;

struct Args {
  std::string dltune = "dltune";
  int steps = 6, rounds = 3;
  std::vector<std::string> parts = {"fits", "bubble", "layout", "async", "memory"};
  bool want(const std::string& p) const {
    return std::find(parts.begin(), parts.end(), p) != parts.end();
  }
};

// A chain of `widths.size()` hidden linear + relu layers over 1x28x28 digits.
TrainConfig mlp(const std::vector<int>& widths, int64_t per_replica_batch) {
  nlohmann::json nodes = nlohmann::json::array();
  for (size_t i = 0; i < widths.size(); ++i) {
    nodes.push_back({{"name", "fc" + std::to_string(i)},
                     {"op", "linear"},
                     {"out", widths[i]},
                     {"flatten", i == 0}});
    nodes.push_back({{"name", "relu" + std::to_string(i)}, {"op", "relu"}});
  }
  nodes.push_back({{"name", "head"}, {"op", "linear"}, {"out", 10}});
  auto g = recipes::graph_from_json({{"input", {1, 28, 28}}, {"nodes", nodes}});
  if (!g) {
    std::fprintf(stderr, "bench: %s\n", g.error().message().c_str());
    std::exit(1);
  }
  TrainConfig c;
  c.model = "mlp";
  c.graph = std::move(*g);
  c.per_rank_batch = static_cast<int>(per_replica_batch);
  c.scaling = Scaling::kWeak;
  c.lr = 0.01;
  c.overlap = true;
  return c;
}

// The same MLP as a recipe (as `dltune launch` hands it to its ranks): 3 steps at a per-replica
// batch of 64 on 512 synthetic digits.
std::string mlp_recipe(const std::vector<int>& widths) {
  std::string r =
      "name: mlp\ndata: {kind: synthetic-digits, samples: 569, heldout: 0.1}\nmodel:\n"
      "  nodes:\n";
  for (size_t i = 0; i < widths.size(); ++i) {
    r += "    - {name: fc" + std::to_string(i) + ", op: linear, out: " + std::to_string(widths[i]) +
         (i == 0 ? ", flatten: true" : "") + "}\n";
    r += "    - {name: relu" + std::to_string(i) + ", op: relu}\n";
  }
  return r + "    - {name: head, op: linear, out: 10}\n" +
         "training:\n  steps: 3\n  batch: {per_rank: 64}\n  scaling: weak\n"
         "  optimizer: {kind: sgd, lr: 0.01}\n";
}

TrainConfig with_layout(TrainConfig c, const recipes::ParallelLayout& l) {
  c.stages = l.stages;
  c.partition = l.partition;
  c.microbatches = l.microbatches;
  c.pipeline_schedule = l.schedule;
  c.recompute = l.recompute == recipes::Recompute::kStage;
  return c;
}

struct Measured {
  double step_s = 0;                // median over the ranks' mean step time (rank 0's)
  std::vector<double> busy, sched;  // per rank: forward/backward and schedule seconds
};

// `steps` timed steps (after one warm-up) of `cfg` on `ranks` threads.
Measured train(const TrainConfig& cfg, int ranks, int steps, const Dataset& data) {
  Measured m;
  m.busy.assign(static_cast<size_t>(ranks), 0);
  m.sched.assign(static_cast<size_t>(ranks), 0);
  std::vector<double> wall(static_cast<size_t>(ranks), 0);
  Status st = comm::spawn(ranks, [&](comm::Communicator& c) -> Status {
    auto t = Trainer::create(cfg, ranks > 1 ? &c : nullptr, data, nullptr);
    if (!t) return t.error();
    if (auto l = (*t)->step(false); !l) return l.error();
    const double b0 = (*t)->pipeline_busy_seconds(), s0 = (*t)->pipeline_schedule_seconds();
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i)
      if (auto l = (*t)->step(false); !l) return l.error();
    const auto r = static_cast<size_t>(c.rank());
    wall[r] = std::chrono::duration<double>(Clock::now() - t0).count() / steps;
    m.busy[r] = (*t)->pipeline_busy_seconds() - b0;
    m.sched[r] = (*t)->pipeline_schedule_seconds() - s0;
    return ok_status();
  });
  if (!st) {
    std::fprintf(stderr, "bench: training failed: %s\n", st.error().message().c_str());
    std::exit(1);
  }
  m.step_s = *std::max_element(wall.begin(), wall.end());
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

recipes::Graph graph_of(const TrainConfig& c) { return *model_graph(c); }

std::vector<LayoutCandidate> candidates(const TrainConfig& c, int ranks, int64_t limit,
                                        const NodeCosts* costs = nullptr) {
  LayoutRequest rq;
  rq.buffers = batch_buffers;
  rq.ranks = ranks;
  rq.global_batch = c.per_rank_batch;
  rq.batch_per_replica = true;
  rq.memory_limit = limit;
  if (costs != nullptr) {  // as a tuned launch does with `dltune-worker profile --fit`'s
    rq.node_cost = costs->per_sample;
    rq.node_fixed_cost = costs->per_call;
    rq.optimizer_cost_per_parameter = costs->optimizer_per_parameter;
    rq.cost_per_second = 1.0;
  }
  auto cands = planning::layout_candidates(graph_of(c), rq);
  if (!cands) {
    std::fprintf(stderr, "bench: %s\n", cands.error().message().c_str());
    std::exit(1);
  }
  return *cands;
}

// 1.
int fits_only_pipelined(const Args& a, const Dataset& data) {
  const TrainConfig c = mlp({2048, 2048, 2048, 2048}, 32);
  const auto free = candidates(c, 2, 0);
  int64_t dp = 0, two = 0;
  for (const auto& k : free) (k.layout.stages == 1 ? dp : two) = k.layout.memory_bytes;
  if (!(two > 0 && two < dp)) return 0;
  const int64_t limit = (dp + two) / 2;
  const auto tight = candidates(c, 2, limit);
  const recipes::ParallelLayout& l = tight.front().layout;
  std::printf("fits: data parallel needs %s, 2 stages %s, limit %s: chose %s\n",
              strings::format_bytes(static_cast<uint64_t>(dp)).c_str(),
              strings::format_bytes(static_cast<uint64_t>(two)).c_str(),
              strings::format_bytes(static_cast<uint64_t>(limit)).c_str(), l.reason.c_str());
  if (l.stages != 2) return 0;
  train(with_layout(c, l), 2, a.steps, data);  // exits on failure
  return 1;
}

// 2.
double bubble(const Args& a, const Dataset& data) {
  const int S = 2, M = 8;
  TrainConfig c = mlp({1024, 1024, 1024, 1024}, 64);
  recipes::ParallelLayout l;
  l.stages = S;
  l.microbatches = M;
  l.partition = candidates(c, S, 0).back().layout.partition;
  for (const auto& k : candidates(c, S, 0))
    if (k.layout.stages == S) l.partition = k.layout.partition;
  std::vector<double> idle;                                            // the bottleneck's
  std::vector<std::vector<double>> per_stage(static_cast<size_t>(S));  // each stage's
  for (int r = 0; r < a.rounds; ++r) {
    const Measured m = train(with_layout(c, l), S, a.steps, data);
    double least = 1;
    for (int s = 0; s < S; ++s) {
      const double i = 1 - m.busy[static_cast<size_t>(s)] / m.sched[static_cast<size_t>(s)];
      per_stage[static_cast<size_t>(s)].push_back(i);
      least = std::min(least, i);
    }
    idle.push_back(least);
  }
  const double theory = static_cast<double>(S - 1) / (M + S - 1);
  // The schedule's bubble is the bottleneck stage's idle time: a lighter stage idles longer
  // also because it waits for the heavier one, which the theory's equal stages leave out.
  std::string stages;
  for (int s = 0; s < S; ++s)
    stages +=
        (s ? ", " : "") + std::to_string(median(per_stage[static_cast<size_t>(s)])).substr(0, 5);
  std::printf(
      "bubble: 1F1B, %d stages, %d micro-batches: bottleneck stage idle %.3f (median of %d; "
      "each stage: %s), theory %.3f\n",
      S, M, median(idle), a.rounds, stages.c_str(), theory);
  return median(idle) / theory;
}

// 3. The tuner's choice as a tuned launch makes it: the layouts ranked by this machine's timed
// node costs, the trials measuring those layouts_to_measure() picks and keeping the fastest.
// Every layout is measured here, so the tuner's pick is the fastest measured of its set.
double layout_vs_exhaustive(const Args& a, const Dataset& data) {
  double worst = 1e9;
  const TrainConfig c = mlp({1024, 1024, 1024, 1024, 1024, 1024}, 32);
  auto costs = measure_node_costs(c, graph_of(c), c.per_rank_batch);
  if (!costs) {
    std::fprintf(stderr, "bench: timing the nodes: %s\n", costs.error().message().c_str());
    std::exit(1);
  }
  for (int ranks : {2, 4}) {
    const auto cands = candidates(c, ranks, 0, &*costs);
    const std::vector<size_t> tuned = layouts_to_measure(cands);
    std::vector<std::vector<double>> sps(cands.size());
    for (int r = 0; r < a.rounds; ++r)
      for (size_t i = 0; i < cands.size(); ++i) {
        const TrainConfig ci = with_layout(c, cands[i].layout);
        const Measured m = train(ci, ranks, a.steps, data);
        sps[i].push_back(static_cast<double>(ci.global_batch_for(ranks)) / m.step_s);
      }
    double best = 0, chosen = 0;
    size_t pick = tuned.front();
    for (size_t i : tuned)
      if (median(sps[i]) > median(sps[pick])) pick = i;
    for (size_t i = 0; i < cands.size(); ++i) {
      best = std::max(best, median(sps[i]));
      const bool measured = std::find(tuned.begin(), tuned.end(), i) != tuned.end();
      std::printf("layout: %d ranks, %-60s predicted %6.0f, measured %6.0f samples/s%s\n", ranks,
                  describe_layout(cands[i].layout).c_str(), cands[i].layout.predicted_sps,
                  median(sps[i]),
                  i == pick  ? "  (chosen)"
                  : measured ? "  (trial)"
                             : "");
    }
    chosen = median(sps[pick]);
    worst = std::min(worst, chosen / best);
  }
  return worst;
}

// 4.
double async_vs_1f1b(const Args& a, const Dataset& data) {
  TrainConfig c = mlp({2048, 2048, 512, 512}, 64);
  recipes::ParallelLayout l;
  l.stages = 2;
  l.microbatches = 8;
  l.partition = {"fc0", "fc2"};  // stage 0: 784x2048 + 2048x2048; stage 1: 2048x512 + 512x512
  std::vector<double> ratio;
  for (int r = 0; r < a.rounds; ++r) {
    l.schedule = recipes::PipelineSchedule::kOneFOneB;
    const double f = train(with_layout(c, l), 2, a.steps, data).step_s;
    l.schedule = recipes::PipelineSchedule::kAsync;
    const double as = train(with_layout(c, l), 2, a.steps, data).step_s;
    ratio.push_back(f / as);
  }
  std::printf(
      "async: imbalanced 2 stages, 8 micro-batches: 1F1B step / async step %.3f (median "
      "of %d)\n",
      median(ratio), a.rounds);
  return median(ratio);
}

// 5. The ranks as processes: `dltune run -n R --plan P --recipe R -- dltune-worker train
// --summary S`, as `dltune launch` runs them.
double mem_err_max(const Args& a) {
  const std::string tmp = "/tmp/dltune-bench-parallel-" + std::to_string(getpid());
  (void)paths::make_dirs(tmp);
  const std::string worker = a.dltune.substr(0, a.dltune.rfind('/') + 1) + "dltune-worker";
  const std::string recipe = tmp + "/mlp.yaml";
  (void)paths::write_file_atomic(recipe, mlp_recipe({2048, 2048, 2048, 2048}));
  struct Case {
    const char* name;
    int ranks, stages;
    recipes::PipelineSchedule schedule;
    bool recompute;
  };
  using recipes::PipelineSchedule;
  double worst = 0;
  for (const Case& k : {Case{"dp1", 1, 1, PipelineSchedule::kOneFOneB, false},
                        Case{"dp2", 2, 1, PipelineSchedule::kOneFOneB, false},
                        Case{"s2-1f1b", 2, 2, PipelineSchedule::kOneFOneB, false},
                        Case{"s2-gpipe", 2, 2, PipelineSchedule::kGpipe, false},
                        Case{"s2-recompute", 2, 2, PipelineSchedule::kOneFOneB, true}}) {
    recipes::Plan p = recipes::default_plan(1, k.ranks, 64, recipes::Algorithm::kRing);
    recipes::ParallelLayout& l = p.parallel;
    l.stages = k.stages;
    l.replicas = k.ranks / k.stages;
    l.microbatches = k.stages > 1 ? 8 : 1;
    l.schedule = k.schedule;
    l.recompute = k.recompute ? recipes::Recompute::kStage : recipes::Recompute::kNone;
    if (k.stages > 1) l.partition = {"fc0", "fc2"};
    p.training.global_batch = 64 * l.replicas;
    const std::string plan = tmp + "/" + k.name + ".plan", out = tmp + "/" + k.name + ".out.json";
    (void)paths::write_file_atomic(plan, recipes::serialize_plan(p));
    const std::string cmd = a.dltune + " run -n " + std::to_string(k.ranks) + " --plan " + plan +
                            " --recipe " + recipe + " -- " + worker + " train --summary " + out +
                            " > " + tmp + "/log 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "bench: %s failed (see %s/log)\n", k.name, tmp.c_str());
      std::exit(1);
    }
    auto text = paths::read_file(out);
    const auto j = nlohmann::json::parse(text ? *text : "", nullptr, false);
    if (!j.is_object() || !j.contains("memory") || !j["memory"].contains("max_error")) {
      std::fprintf(stderr, "bench: %s: no memory measurement in %s\n", k.name, out.c_str());
      std::exit(1);
    }
    for (const auto& r : j["memory"]["ranks"])
      std::printf("memory: %-13s rank %d estimate %10s measured %10s error %.3f\n", k.name,
                  r["rank"].get<int>(),
                  strings::format_bytes(r["estimate_bytes"].get<uint64_t>()).c_str(),
                  strings::format_bytes(r.value("measured_bytes", uint64_t{0})).c_str(),
                  r.value("error", -1.0));
    worst = std::max(worst, j["memory"]["max_error"].get<double>());
  }
  std::system(("rm -rf " + tmp).c_str());
  return worst;
}

}  // namespace
}  // namespace dltune::engine

int main(int argc, char** argv) {
  using namespace dltune::engine;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure as it is measured
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has = i + 1 < argc;
    if (k == "--dltune" && has)
      a.dltune = argv[++i];
    else if (k == "--steps" && has)
      a.steps = std::atoi(argv[++i]);
    else if (k == "--rounds" && has)
      a.rounds = std::atoi(argv[++i]);
    else if (k == "--parts" && has)
      a.parts = dltune::strings::split(argv[++i], ',');
    else {
      std::fprintf(stderr,
                   "usage: dltune-bench-parallel [--dltune PATH] [--steps N] [--rounds R] "
                   "[--parts fits,bubble,layout,async,memory]\n");
      return 2;
    }
  }
  if (a.steps < 1 || a.rounds < 1) {
    std::fprintf(stderr, "dltune-bench-parallel: --steps and --rounds must be at least 1\n");
    return 2;
  }
  // One BLAS thread per rank, as dltune-worker runs its ranks (train_config threads 1); without
  // it OpenBLAS would run every rank's products on all cores at once.
  set_blas_threads(1);
  std::printf(
      "bench/parallel: ranks as threads of one process (comm::spawn), one BLAS thread each, "
      "rounds interleaved; memory: ranks as processes (dltune run + dltune-worker train)\n");
  const Dataset data = synthetic_digits(1024, 11);
  auto fmt = [](double v) { return v < 0 ? std::string("na") : std::to_string(v).substr(0, 5); };
  const int fits = a.want("fits") ? fits_only_pipelined(a, data) : -1;
  const double bub = a.want("bubble") ? bubble(a, data) : -1;
  const double lay = a.want("layout") ? layout_vs_exhaustive(a, data) : -1;
  const double asy = a.want("async") ? async_vs_1f1b(a, data) : -1;
  const double mem = a.want("memory") ? mem_err_max(a) : -1;
  std::printf(
      "summary: fits_only_pipelined=%s bubble_vs_theory=%s layout_vs_exhaustive=%s "
      "async_vs_1f1b=%s mem_err_max=%s\n",
      fits < 0 ? "na" : std::to_string(fits).c_str(), fmt(bub).c_str(), fmt(lay).c_str(),
      fmt(asy).c_str(), fmt(mem).c_str());
  return 0;
}
