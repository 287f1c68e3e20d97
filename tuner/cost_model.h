// Cost models for collectives: time as a function of message size.
//
// The classic alpha-beta(-gamma) model says an algorithm's time is t(n) = a + b n, where a
// collects the per-message latencies (alpha times the number of steps) and b the per-byte
// transfer and reduction costs (beta and gamma times the algorithm's traffic factor). On a real
// machine the per-byte cost changes with the cache level a message fits in, so one straight
// line over 4 B .. 256 MiB fits badly. PiecewiseCost keeps the measured points and
// interpolates between them in log-log space, and extrapolates beyond the last points with
// the alpha-beta line through the two nearest ones.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common/result.h"

namespace dltune::tuner {

struct AlphaBeta {
  double alpha_s = 0;       // seconds per call
  double beta_s_per_b = 0;  // seconds per byte
  double predict(double bytes) const { return alpha_s + beta_s_per_b * bytes; }
};

// Least-squares fit of t = alpha + beta * n to (bytes, seconds) points, minimising relative
// error (weights 1/t^2) so small messages count as much as large ones. Both coefficients are
// clamped at >= 0. Errors: fewer than two points, or a non-positive time.
Result<AlphaBeta> fit_alpha_beta(const std::vector<std::pair<double, double>>& points);

class PiecewiseCost {
 public:
  // Points (bytes, seconds) with distinct positive byte counts, any order. Errors as above.
  static Result<PiecewiseCost> fit(std::vector<std::pair<double, double>> points);
  double predict(double bytes) const;
  // The least time the points leave possible at `bytes` if the cost is smooth up to an
  // unknown cliff. Between two points whose cost rises faster than in proportion to the size
  // (a cliff lies somewhere between them: a protocol switch, a cache knee) the interpolation
  // smears the cliff over the whole interval, but just above the lower point the cost may
  // still be that point's, grown at most in proportion (t = alpha + beta n never grows
  // faster); where the cost falls, it may already be the upper point's. So: the least of
  // predict(), the lower point's time x bytes / its bytes, and the upper point's time. Equal to
  // predict() wherever neighbouring points rise, but no faster than linearly, and outside the
  // points.
  double optimistic(double bytes) const;

 private:
  std::vector<std::pair<double, double>> pts_;  // sorted by bytes
};

}  // namespace dltune::tuner
