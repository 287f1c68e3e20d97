// How sure the tuner is of what it chose, in numbers a plan records and a person reads:
// - training choices: the paired comparison of two candidates over the interleaving cycles both
//   ran in the trial search (each cycle ran them back to back, so a slow machine phase hits
//   both), as a throughput ratio with its ~95 % interval (common/stats.h paired_rate_ratio);
// - collective choices: the share of allreduce time an exhaustive search could still gain,
//   estimated from cost models fitted through the sweep's measurements (tuner/cost_model.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/stats.h"
#include "tuner/recipe_tuning.h"

namespace dltune::tuner {

// Candidates a and b over every cycle both ran (same round, same cycle index) in `trials`,
// from their chunks; `work_a` / `work_b`: samples per step (their global batches). rounds is 0
// when the trials carry no chunks (older trial programs).
stats::RatioInterval compare_trials(const std::vector<TrialRecord>& trials, size_t a, size_t b,
                                    double work_a, double work_b);

// "1.12x (95 % interval 1.05-1.19, 12 rounds)"; when the interval holds 1: "1.01x, not a
// significant difference (95 % interval 0.97-1.05, 12 rounds)"; with too few rounds for an
// interval: "1.30x (2 rounds: too few for an interval)".
std::string describe_ratio(const stats::RatioInterval& r);

// The estimated regret of the training choice: the largest share of throughput a measured
// rival could have over the winner at the top of its interval, max(0, 1/lo - 1) over the
// rivals with an interval (0 when the winner beat them all significantly... by at least its
// interval's low end); < 0 when no rival has one.
double training_regret(const std::vector<stats::RatioInterval>& winner_vs_rivals);

// One measured collective time: algorithm (a candidate name: "ring", "ring/1MiB") at a size.
struct CollectivePoint {
  uint64_t bytes = 0;
  std::string algo;
  double us = 0;
};

// The estimated regret of a collective plan at `sizes` (bytes, weight: how many such messages
// a step has): sum of the chosen algorithm's time over sum of the least time any algorithm
// would take, minus 1. An algorithm's time at a size is its measurement there, else its cost
// model's optimistic prediction (PiecewiseCost::optimistic: the least the points leave
// possible), so the estimate errs towards regret. `chosen(bytes)` names the plan's algorithm.
// < 0 when no algorithm has two measured sizes, or the chosen one cannot be estimated.
double collective_regret(const std::vector<CollectivePoint>& points,
                         const std::function<std::string(uint64_t)>& chosen,
                         const std::vector<std::pair<uint64_t, double>>& sizes);

}  // namespace dltune::tuner
