// The additive screening model (tuner/screening.h): design rows, a greedy D-optimal design,
// and the least-squares fit in the measured rows' span.
//
// The linear algebra is small (a few dozen parameters at most: one per level of each factor)
// and done here in plain loops. The span of the measured rows is kept as an orthonormal basis
// (modified Gram-Schmidt, twice, for stability); the fit solves the normal equations in that
// basis's coordinates, where they are of full rank, so a factor level that no measured
// candidate has leaves the fit well-posed and predictions that need it undetermined.
#include "tuner/screening.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace dltune::tuner::screening {
namespace {

constexpr double kSpanTolerance = 1e-9;  // a row's part outside a span, relative to its norm
constexpr double kDesignRidge = 1e-3;    // M = X'X + ridge I before the design is identified

using Vec = std::vector<double>;

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t k = 0; k < a.size(); ++k) s += a[k] * b[k];
  return s;
}

// Levels per factor: the largest level seen + 1.
std::vector<int> level_counts(const std::vector<Levels>& cs) {
  std::vector<int> n(cs.empty() ? 0 : cs.front().size(), 1);
  for (const Levels& l : cs) {
    for (size_t f = 0; f < n.size() && f < l.size(); ++f) n[f] = std::max(n[f], l[f] + 1);
  }
  return n;
}

size_t parameters(const std::vector<int>& counts) {
  size_t p = 1;
  for (int c : counts) p += static_cast<size_t>(c - 1);
  return p;
}

// The design row: 1, then per factor the indicators of its levels 1..n-1. Empty when a level
// is outside `counts`.
Vec row(const std::vector<int>& counts, const Levels& l) {
  if (l.size() != counts.size()) return {};
  Vec x(parameters(counts), 0.0);
  x[0] = 1;
  size_t at = 1;
  for (size_t f = 0; f < counts.size(); ++f) {
    if (l[f] < 0 || l[f] >= counts[f]) return {};
    if (l[f] > 0) x[at + static_cast<size_t>(l[f]) - 1] = 1;
    at += static_cast<size_t>(counts[f] - 1);
  }
  return x;
}

// x less its projection on the orthonormal rows of `basis` (twice: modified Gram-Schmidt
// loses orthogonality once, rarely twice).
Vec outside(const std::vector<Vec>& basis, Vec x) {
  for (int pass = 0; pass < 2; ++pass) {
    for (const Vec& b : basis) {
      const double c = dot(x, b);
      for (size_t k = 0; k < x.size(); ++k) x[k] -= c * b[k];
    }
  }
  return x;
}

// Adds x's direction to `basis` when it lies outside it; true when it did.
bool extend(std::vector<Vec>& basis, const Vec& x) {
  Vec r = outside(basis, x);
  const double n = std::sqrt(dot(r, r)), nx = std::sqrt(dot(x, x));
  if (!(n > kSpanTolerance * std::max(1.0, nx))) return false;
  for (double& v : r) v /= n;
  basis.push_back(std::move(r));
  return true;
}

// Solves A c = b (A square, symmetric positive definite in practice) by Gaussian elimination
// with partial pivoting; false when A is singular.
bool solve(std::vector<Vec> a, Vec b, Vec* c) {
  const size_t n = b.size();
  for (size_t k = 0; k < n; ++k) {
    size_t piv = k;
    for (size_t i = k + 1; i < n; ++i) {
      if (std::fabs(a[i][k]) > std::fabs(a[piv][k])) piv = i;
    }
    if (!(std::fabs(a[piv][k]) > 1e-12)) return false;
    std::swap(a[k], a[piv]);
    std::swap(b[k], b[piv]);
    for (size_t i = k + 1; i < n; ++i) {
      const double m = a[i][k] / a[k][k];
      for (size_t j = k; j < n; ++j) a[i][j] -= m * a[k][j];
      b[i] -= m * b[k];
    }
  }
  c->assign(n, 0.0);
  for (size_t k = n; k-- > 0;) {
    double s = b[k];
    for (size_t j = k + 1; j < n; ++j) s -= a[k][j] * (*c)[j];
    (*c)[k] = s / a[k][k];
  }
  return true;
}

}  // namespace

std::vector<size_t> design(const std::vector<Levels>& candidates, size_t extra) {
  const std::vector<int> counts = level_counts(candidates);
  if (std::count_if(counts.begin(), counts.end(), [](int c) { return c >= 2; }) < 2) return {};
  const size_t p = parameters(counts);
  std::vector<Vec> rows;
  std::vector<Vec> all_span;  // the rank every candidate's rows reach together
  for (const Levels& l : candidates) {
    rows.push_back(row(counts, l));
    if (rows.back().empty()) return {};
    extend(all_span, rows.back());
  }
  // Greedy D-optimality: each pick maximises x' M^-1 x (the factor by which det(M) grows),
  // M = X'X + ridge I kept as its inverse by Sherman-Morrison.
  std::vector<Vec> inv(p, Vec(p, 0.0));
  for (size_t k = 0; k < p; ++k) inv[k][k] = 1 / kDesignRidge;
  std::vector<bool> picked(candidates.size(), false);
  std::vector<Vec> span;
  size_t extra_left = extra;
  std::vector<size_t> out;
  while (out.size() < candidates.size()) {
    if (span.size() >= all_span.size()) {
      if (extra_left == 0) break;
      --extra_left;
    }
    size_t best = candidates.size();
    double best_gain = -1;
    Vec best_mx;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (picked[i]) continue;
      Vec mx(p, 0.0);
      for (size_t r = 0; r < p; ++r) mx[r] = dot(inv[r], rows[i]);
      const double gain = dot(rows[i], mx);
      if (gain > best_gain * (1 + 1e-9)) {
        best = i;
        best_gain = gain;
        best_mx = std::move(mx);
      }
    }
    if (best == candidates.size()) break;
    picked[best] = true;
    out.push_back(best);
    extend(span, rows[best]);
    for (size_t r = 0; r < p; ++r) {
      for (size_t c = 0; c < p; ++c) inv[r][c] -= best_mx[r] * best_mx[c] / (1 + best_gain);
    }
  }
  if (4 * out.size() > 3 * candidates.size()) return {};
  std::sort(out.begin(), out.end());
  return out;
}

Result<Fit> fit(const std::vector<Levels>& candidates,
                const std::vector<std::pair<size_t, double>>& measured) {
  if (measured.empty()) return invalid_input("the screening model needs a measured candidate");
  Fit f;
  f.levels_per_factor = level_counts(candidates);
  const size_t p = parameters(f.levels_per_factor);
  std::vector<Vec> x;
  Vec y;
  for (const auto& [i, rate] : measured) {
    if (i >= candidates.size()) {
      return invalid_input("screening: candidate " + std::to_string(i) + " of " +
                           std::to_string(candidates.size()));
    }
    if (!std::isfinite(rate) || !(rate > 0)) {
      return invalid_input("screening: candidate " + std::to_string(i) +
                           "'s rate is not a number > 0");
    }
    x.push_back(row(f.levels_per_factor, candidates[i]));
    y.push_back(std::log(rate));
    extend(f.basis, x.back());
  }
  // beta = B' c, c minimising |X B' c - y|: normal equations in the span's coordinates.
  const size_t r = f.basis.size();
  std::vector<Vec> z(x.size(), Vec(r, 0.0));  // z = X B'
  for (size_t n = 0; n < x.size(); ++n) {
    for (size_t k = 0; k < r; ++k) z[n][k] = dot(x[n], f.basis[k]);
  }
  std::vector<Vec> a(r, Vec(r, 0.0));
  Vec b(r, 0.0), c;
  for (size_t n = 0; n < z.size(); ++n) {
    for (size_t k = 0; k < r; ++k) {
      b[k] += z[n][k] * y[n];
      for (size_t j = 0; j < r; ++j) a[k][j] += z[n][k] * z[n][j];
    }
  }
  if (!solve(a, b, &c)) return internal_error("screening: the normal equations are singular");
  f.coef.assign(p, 0.0);
  for (size_t k = 0; k < r; ++k) {
    for (size_t j = 0; j < p; ++j) f.coef[j] += c[k] * f.basis[k][j];
  }
  double sse = 0;
  for (size_t n = 0; n < x.size(); ++n) {
    const double e = y[n] - dot(x[n], f.coef);
    sse += e * e;
  }
  f.measured = x.size();
  f.dof = x.size() - r;
  f.rms = f.dof > 0 ? std::sqrt(sse / static_cast<double>(f.dof)) : 0.0;
  return f;
}

std::optional<double> predict(const Fit& f, const Levels& levels) {
  const Vec x = row(f.levels_per_factor, levels);
  if (x.empty() || f.coef.size() != x.size()) return std::nullopt;
  const Vec r = outside(f.basis, x);
  if (std::sqrt(dot(r, r)) > 1e-6 * std::sqrt(dot(x, x))) return std::nullopt;
  return std::exp(dot(x, f.coef));
}

}  // namespace dltune::tuner::screening
