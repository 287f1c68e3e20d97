#include "tuner/cost_model.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace dltune::tuner {

Result<AlphaBeta> fit_alpha_beta(const std::vector<std::pair<double, double>>& points) {
  if (points.size() < 2) return invalid_input("an alpha-beta fit needs at least two sizes");
  // Weighted normal equations for t = a + b n with weights w = 1 / t^2.
  double sw = 0, swn = 0, swnn = 0, swt = 0, swnt = 0;
  for (const auto& [n, t] : points) {
    if (!(t > 0)) return invalid_input("an alpha-beta fit needs positive times");
    const double w = 1.0 / (t * t);
    sw += w;
    swn += w * n;
    swnn += w * n * n;
    swt += w * t;
    swnt += w * n * t;
  }
  const double det = sw * swnn - swn * swn;
  AlphaBeta ab;
  if (std::abs(det) < 1e-300) {  // all points at one size
    ab.alpha_s = swt / sw;
    return ab;
  }
  ab.beta_s_per_b = (sw * swnt - swn * swt) / det;
  ab.alpha_s = (swt - ab.beta_s_per_b * swn) / sw;
  if (ab.beta_s_per_b < 0) {
    ab.beta_s_per_b = 0;
    ab.alpha_s = swt / sw;
  }
  if (ab.alpha_s < 0) {  // refit through the origin
    ab.alpha_s = 0;
    ab.beta_s_per_b = swnt / swnn;
  }
  return ab;
}

Result<PiecewiseCost> PiecewiseCost::fit(std::vector<std::pair<double, double>> points) {
  if (points.size() < 2) return invalid_input("a cost model needs at least two sizes");
  std::sort(points.begin(), points.end());
  for (size_t i = 0; i < points.size(); ++i) {
    if (!(points[i].first > 0) || !(points[i].second > 0)) {
      return invalid_input("a cost model needs positive sizes and times");
    }
    if (i > 0 && points[i].first == points[i - 1].first) {
      return invalid_input("a cost model needs distinct sizes, got " +
                           std::to_string(points[i].first) + " twice");
    }
  }
  PiecewiseCost c;
  c.pts_ = std::move(points);
  return c;
}

double PiecewiseCost::predict(double bytes) const {
  const auto& p = pts_;
  const size_t m = p.size();
  auto line = [](const std::pair<double, double>& a, const std::pair<double, double>& b, double x) {
    const double slope = std::max(0.0, (b.second - a.second) / (b.first - a.first));
    return std::max(0.0, a.second + slope * (x - a.first));
  };
  if (bytes >= p[m - 1].first) return std::max(p[m - 1].second, line(p[m - 2], p[m - 1], bytes));
  if (bytes <= p[0].first) return p[0].second;  // latency-bound below the smallest probe
  const auto it =
      std::upper_bound(p.begin(), p.end(), bytes,
                       [](double v, const std::pair<double, double>& e) { return v < e.first; });
  const auto& hi = *it;
  const auto& lo = *(it - 1);
  const double f =
      (std::log(bytes) - std::log(lo.first)) / (std::log(hi.first) - std::log(lo.first));
  return std::exp(std::log(lo.second) + f * (std::log(hi.second) - std::log(lo.second)));
}

double PiecewiseCost::optimistic(double bytes) const {
  const auto& p = pts_;
  const double t = predict(bytes);
  if (bytes <= p.front().first || bytes >= p.back().first) return t;
  const auto it =
      std::upper_bound(p.begin(), p.end(), bytes,
                       [](double v, const std::pair<double, double>& e) { return v < e.first; });
  const auto& hi = *it;
  const auto& lo = *(it - 1);
  return std::min({t, lo.second * bytes / lo.first, hi.second});
}

}  // namespace dltune::tuner
