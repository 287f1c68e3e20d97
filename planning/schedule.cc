#include "planning/schedule.h"

#include <algorithm>
#include <limits>

namespace dltune::planning {

using recipes::PipelineSchedule;

std::vector<PipeOp> static_schedule(PipelineSchedule schedule, int stages, int stage, int m) {
  std::vector<PipeOp> ops;
  if (schedule == PipelineSchedule::kGpipe) {
    for (int i = 0; i < m; ++i) ops.push_back({true, i});
    for (int i = 0; i < m; ++i) ops.push_back({false, i});
    return ops;
  }
  // 1F1B: warm-up forwards, steady one-forward-one-backward, cool-down backwards.
  const int warmup = std::min(stages - stage - 1, m);
  int f = 0, b = 0;
  for (; f < warmup; ++f) ops.push_back({true, f});
  while (f < m) {
    ops.push_back({true, f++});
    ops.push_back({false, b++});
  }
  while (b < m) ops.push_back({false, b++});
  return ops;
}

int async_window(int stages, int stage, int m) { return std::max(1, std::min(stages - stage, m)); }

int in_flight(PipelineSchedule schedule, int stages, int stage, int m) {
  switch (schedule) {
    case PipelineSchedule::kGpipe:
      return m;
    case PipelineSchedule::kOneFOneB:
      return std::max(1, std::min(stages - stage, m));
    case PipelineSchedule::kAsync:
      return async_window(stages, stage, m);
  }
  return m;
}

PipelineSimulation simulate(PipelineSchedule schedule, const std::vector<double>& forward,
                            const std::vector<double>& backward, int m) {
  // Discrete events in time order: each round, every stage proposes the op it can start
  // earliest (its next op in a static order; for async the next backward or, within the
  // window, the next forward, whichever message is there first, a backward winning ties), and
  // the earliest proposal runs. A forward of micro-batch i at stage s > 0 needs stage s - 1's
  // forward of i; a backward at s < S - 1 needs stage s + 1's backward of i; the last stage's
  // backward needs its own forward. Messages not produced yet arrive after any start proposed
  // now (every op takes time), so choosing among the known ones is what an async runtime does.
  const double inf = std::numeric_limits<double>::infinity();
  const int stages = static_cast<int>(forward.size());
  const auto S = static_cast<size_t>(stages);
  std::vector<std::vector<double>> f_done(S, std::vector<double>(static_cast<size_t>(m), inf));
  std::vector<std::vector<double>> b_done = f_done;
  std::vector<double> clock(S, 0.0), busy(S, 0.0);
  std::vector<std::vector<PipeOp>> orders(S);
  std::vector<size_t> next(S, 0);
  std::vector<int> next_f(S, 0), done_b(S, 0);
  if (schedule != PipelineSchedule::kAsync)
    for (int s = 0; s < stages; ++s)
      orders[static_cast<size_t>(s)] = static_schedule(schedule, stages, s, m);
  auto ready_f = [&](size_t s, int i) {
    return s == 0 ? 0.0 : f_done[s - 1][static_cast<size_t>(i)];
  };
  auto ready_b = [&](size_t s, int i) {
    return s + 1 == S ? f_done[s][static_cast<size_t>(i)] : b_done[s + 1][static_cast<size_t>(i)];
  };
  for (int remaining = 2 * m * stages; remaining > 0; --remaining) {
    size_t best = S;
    double best_start = inf;
    PipeOp best_op;
    for (size_t s = 0; s < S; ++s) {
      PipeOp op;
      double at = inf;
      if (schedule != PipelineSchedule::kAsync) {
        if (next[s] >= orders[s].size()) continue;
        op = orders[s][next[s]];
        at = op.forward ? ready_f(s, op.microbatch) : ready_b(s, op.microbatch);
      } else {
        const int w = async_window(stages, static_cast<int>(s), m);
        const double tb = done_b[s] < next_f[s] ? ready_b(s, done_b[s]) : inf;
        const double tf = next_f[s] < m && next_f[s] - done_b[s] < w ? ready_f(s, next_f[s]) : inf;
        const bool run_backward = tb <= tf;
        op = {!run_backward, run_backward ? done_b[s] : next_f[s]};
        at = run_backward ? tb : tf;
      }
      if (at == inf) continue;
      const double start = std::max(clock[s], at);
      if (start < best_start) best = s, best_start = start, best_op = op;
    }
    PipelineSimulation sim;
    if (best == S) {
      sim.step_time = -1;  // no stage can move: the orders deadlock
      return sim;
    }
    const double dur = best_op.forward ? forward[best] : backward[best];
    clock[best] = best_start + dur;
    busy[best] += dur;
    (best_op.forward ? f_done : b_done)[best][static_cast<size_t>(best_op.microbatch)] =
        clock[best];
    if (schedule == PipelineSchedule::kAsync)
      ++(best_op.forward ? next_f : done_b)[best];
    else
      ++next[best];
  }
  PipelineSimulation sim;
  sim.step_time = *std::max_element(clock.begin(), clock.end());
  for (size_t s = 0; s < S; ++s) sim.idle_fraction.push_back(1.0 - busy[s] / sim.step_time);
  return sim;
}

}  // namespace dltune::planning
