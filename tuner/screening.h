// Screening a search with an additive model (issue 39): which candidates to measure first, and
// what the measured ones predict of the rest.
//
// Why. Tuning a user's program starts the program afresh for every trial (tuner/program_
// tuning.h), and a start (Python, torch, the rendezvous) can cost as much as the trial's steps:
// successive halving, which measures every candidate once before it halves, then pays more in
// starts than an exhaustive grid saves in steps. Most of a program's search is a few settings
// that act nearly independently on its speed (a larger batch runs faster per sample whatever
// the ranks; a bucket size barely matters), so a few measured candidates say much about the
// others.
//
// How it works. A candidate is its level in each factor (the per-rank batch, the ranks x
// threads shape, the bucket size). The model is additive in the logarithm of the throughput:
// log(rate) = mu + effect[factor][level], the first level of each factor the reference (a main-
// effects model, as a fractional factorial screen in the design of experiments). design()
// picks the candidates to measure first, greedily by D-optimality (each pick the candidate
// whose design row adds most to det(X'X), ties to the earliest), until the model is identified,
// and `extra` more so that its residual can be seen; it is used only when it saves a quarter of
// the candidates or more. fit() solves the least-squares fit of the measured rates; predict()
// gives a candidate's rate and says when the measured candidates do not determine it (a level
// none of them has, after failures). The caller (tune_program) measures every candidate the
// model cannot rule out (predicted within a margin of the best measured, the margin twice the
// larger of the fit's residual and the trials' noise) and sets the others aside, unmeasured.
// The model misses interactions between factors; the residual of the extra candidates widens
// the margin when they matter, and `tune.screening: off` measures every candidate.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "common/result.h"

namespace dltune::tuner::screening {

// A candidate's level (0-based) in each factor; every candidate has the same number of factors.
using Levels = std::vector<int>;

// The candidates to measure first, in increasing index order: a greedy D-optimal design of the
// main-effects model over `candidates`, identified, plus `extra` candidates. Empty (screen
// nothing: measure every candidate) when fewer than two factors have two levels or more, or
// when the design would hold more than 3/4 of the candidates. Precondition: every Levels has
// the same size and entries >= 0.
std::vector<size_t> design(const std::vector<Levels>& candidates, size_t extra = 1);

// The fitted model.
struct Fit {
  std::vector<int> levels_per_factor;  // the number of levels of each factor (from the candidates)
  std::vector<double> coef;            // mu, then each factor's effects of levels 1..n-1
  std::vector<std::vector<double>> basis;  // the measured design rows' span, orthonormal
  double rms = 0;                          // residual RMS of log(rate): sqrt(SSE / dof)
  size_t dof = 0;                          // measured candidates less the identified parameters
  size_t measured = 0;
};

// Fits log(rate) of the `measured` (candidate index, rate) pairs over `candidates`' levels.
// Errors (invalid_input): no measurement, an index out of range, a rate not finite and > 0.
Result<Fit> fit(const std::vector<Levels>& candidates,
                const std::vector<std::pair<size_t, double>>& measured);

// The model's rate for `levels`; nullopt when the measured candidates do not determine it (a
// level of a factor none of them had, or a combination outside their span).
std::optional<double> predict(const Fit& fit, const Levels& levels);

}  // namespace dltune::tuner::screening
