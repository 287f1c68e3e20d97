#include "engine/train/node_costs.h"

#include <algorithm>
#include <chrono>

#include "common/stats.h"
#include "engine/data/dataset.h"
#include "engine/train/train_data.h"
#include "engine/train/trainer.h"

namespace dltune::engine {
namespace {

double median(std::vector<double> v) { return v.empty() ? 0 : stats::median(v); }

constexpr int64_t kLargeBatch = 64;

}  // namespace

LoneTrainer::LoneTrainer() = default;
LoneTrainer::LoneTrainer(LoneTrainer&&) noexcept = default;
LoneTrainer::~LoneTrainer() = default;

Result<LoneTrainer> lone_trainer(TrainConfig cfg, int threads) {
  cfg.threads = threads;
  cfg.eval_every = 0;
  cfg.checkpoint_every = 0;
  LoneTrainer t;
  t.data = std::make_unique<Dataset>();
  DLTUNE_TRY(load_train_data(cfg, t.data.get(), nullptr, cfg.train_size));
  auto trainer = Trainer::create(cfg, nullptr, *t.data, nullptr);
  if (!trainer) return trainer.error();
  t.trainer = std::move(*trainer);
  return t;
}

Result<NodeProfile> profile_nodes(TrainConfig cfg, int steps, int warmup, int threads,
                                  const std::function<Status()>& before_timing) {
  if (steps < 1 || warmup < 0) return invalid_input("--steps must be >= 1 and --warmup >= 0");
  cfg.steps = warmup + steps + 1;
  set_blas_threads(threads);
  auto lone = lone_trainer(cfg, threads);
  if (!lone) return lone.error();
  auto& trainer = lone->trainer;
  Model& model = trainer->model();
  model.set_profiling(true);
  const size_t n = static_cast<size_t>(model.num_nodes());
  std::vector<std::vector<double>> fwd(n), bwd(n);
  std::vector<double> step_s, compute_s, nodes_s;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup && before_timing) DLTUNE_TRY(before_timing());
    const std::vector<double> f0 = model.forward_seconds(), b0 = model.backward_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    auto loss = trainer->step(false);
    if (!loss) return loss.error();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < warmup) continue;
    double in_nodes = 0;
    for (size_t i = 0; i < n; ++i) {
      fwd[i].push_back(model.forward_seconds()[i] - f0[i]);
      bwd[i].push_back(model.backward_seconds()[i] - b0[i]);
      in_nodes += fwd[i].back() + bwd[i].back();
    }
    step_s.push_back(wall);
    compute_s.push_back(trainer->last().compute_s);
    nodes_s.push_back(in_nodes);
  }
  NodeProfile p;
  p.batch = static_cast<int>(cfg.per_rank_batch);
  for (size_t i = 0; i < n; ++i) {
    p.forward_s.push_back(median(fwd[i]));
    p.backward_s.push_back(median(bwd[i]));
  }
  std::vector<double> opt, input;
  for (size_t k = 0; k < step_s.size(); ++k) {
    opt.push_back(std::max(0.0, step_s[k] - compute_s[k]));
    input.push_back(std::max(0.0, compute_s[k] - nodes_s[k]));
  }
  p.optimizer_s = median(opt);
  p.input_s = median(input);
  p.step_s = median(step_s);
  p.step_samples_s = step_s;
  return p;
}

Result<planning::NodeCosts> measure_node_costs(const TrainConfig& config,
                                               const recipes::Graph& graph, int64_t replica_batch,
                                               int steps) {
  const int64_t hi = std::max<int64_t>(1, std::min(replica_batch, kLargeBatch));
  const int64_t lo = std::max<int64_t>(1, hi / 8);
  std::vector<NodeProfile> p;
  for (int64_t b : {lo, hi}) {
    if (!p.empty() && b == p.front().batch) break;
    TrainConfig c = config;
    c.per_rank_batch = static_cast<int>(b);
    c.stages = 1;
    c.microbatches = 1;
    c.train_size = std::min<int64_t>(c.train_size, std::max<int64_t>(256, 4 * b));
    auto one = profile_nodes(c, steps, 1, 1);
    if (!one) return one.error();
    if (one->forward_s.size() != graph.nodes.size())
      return internal_error("the profile's nodes are not the model graph's");
    p.push_back(std::move(*one));
  }
  const size_t n = graph.nodes.size();
  planning::NodeCosts c;
  c.per_sample.assign(n, 0.0);
  c.per_call.assign(n, 0.0);
  const NodeProfile& big = p.back();
  c.small_batch = p.front().batch;
  c.large_batch = big.batch;
  for (size_t i = 0; i < n; ++i) {
    const double t_hi = big.forward_s[i] + big.backward_s[i];
    if (p.size() == 1) {
      c.per_sample[i] = t_hi / static_cast<double>(big.batch);
      continue;
    }
    const double t_lo = p.front().forward_s[i] + p.front().backward_s[i];
    double slope = (t_hi - t_lo) / static_cast<double>(big.batch - p.front().batch);
    double fixed = t_lo - slope * static_cast<double>(p.front().batch);
    if (slope < 0 || fixed < 0) {  // noise: all of it per sample
      slope = t_hi / static_cast<double>(big.batch);
      fixed = 0;
    }
    c.per_sample[i] = slope;
    c.per_call[i] = fixed;
  }
  const recipes::GraphInfo info = recipes::analyze_graph(graph);
  if (info.ok() && info.parameters > 0)
    c.optimizer_per_parameter = big.optimizer_s / static_cast<double>(info.parameters);
  return c;
}

}  // namespace dltune::engine
