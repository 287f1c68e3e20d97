#include "predict/level_fit.h"

#include <array>
#include <cmath>
#include <limits>

namespace dltune::predict {
namespace {

struct Point {
  double bytes = 0, seconds = 0;
  AllreduceAlgo algo = AllreduceAlgo::kRing;
};

// The modelled algorithm of a measurement row ("ring/262144" is a ring), or false.
bool row_algo(const tuner::db::Measurement& m, AllreduceAlgo* out) {
  if (m.failed || m.collective != "allreduce" || m.median_us <= 0 || m.bytes == 0) return false;
  const std::string name = m.algorithm.substr(0, m.algorithm.find('/'));
  auto a = parse_algo(name);
  if (!a || *a == AllreduceAlgo::kHierPipelined) return false;
  *out = *a;
  return true;
}

Result<std::vector<Point>> usable(const std::vector<tuner::db::Measurement>& rows, int* nodes,
                                  int* per_node) {
  std::vector<Point> pts;
  *nodes = 0;
  for (const auto& m : rows) {
    AllreduceAlgo a;
    if (!row_algo(m, &a)) continue;
    const int n = static_cast<int>(m.key.shape.nodes),
              g = static_cast<int>(m.key.shape.ranks_per_node);
    if (*nodes == 0) *nodes = n, *per_node = g;
    if (n != *nodes || g != *per_node) {
      return invalid_input("the measurements to fit are of several job shapes");
    }
    pts.push_back({static_cast<double>(m.bytes), m.median_us * 1e-6, a});
  }
  if (pts.size() < 3) {
    return invalid_input("a level fit needs at least three allreduce measurements, got " +
                         std::to_string(pts.size()));
  }
  return pts;
}

// Weighted non-negative least squares for t = x . coef over every subset of the three
// unknowns; the best feasible subset's solution.
std::array<double, 3> nnls3(const std::vector<std::array<double, 3>>& a,
                            const std::vector<double>& t) {
  std::array<double, 3> best{0, 0, 0};
  double best_err = std::numeric_limits<double>::infinity();
  for (int mask = 1; mask < 8; ++mask) {
    int idx[3], k = 0;
    for (int j = 0; j < 3; ++j) {
      if (mask & (1 << j)) idx[k++] = j;
    }
    double m[3][4] = {};
    for (size_t i = 0; i < t.size(); ++i) {
      const double w = 1 / (t[i] * t[i]);
      for (int r = 0; r < k; ++r) {
        for (int c = 0; c < k; ++c)
          m[r][c] += w * a[i][static_cast<size_t>(idx[r])] * a[i][static_cast<size_t>(idx[c])];
        m[r][3] += w * a[i][static_cast<size_t>(idx[r])] * t[i];
      }
    }
    bool singular = false;  // Gauss-Jordan with partial pivoting
    for (int c = 0; c < k && !singular; ++c) {
      int piv = c;
      for (int r = c + 1; r < k; ++r) {
        if (std::abs(m[r][c]) > std::abs(m[piv][c])) piv = r;
      }
      if (std::abs(m[piv][c]) < 1e-300) {
        singular = true;
        break;
      }
      for (int j = 0; j < 4; ++j) std::swap(m[c][j], m[piv][j]);
      for (int r = 0; r < k; ++r) {
        if (r == c) continue;
        const double f = m[r][c] / m[c][c];
        for (int j = 0; j < 4; ++j) m[r][j] -= f * m[c][j];
      }
    }
    if (singular) continue;
    std::array<double, 3> x{0, 0, 0};
    bool feasible = true;
    for (int r = 0; r < k; ++r) {
      x[static_cast<size_t>(idx[r])] = m[r][3] / m[r][r];
      feasible = feasible && x[static_cast<size_t>(idx[r])] >= 0;
    }
    if (!feasible) continue;
    double err = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      const double p = a[i][0] * x[0] + a[i][1] * x[1] + a[i][2] * x[2];
      err += (p / t[i] - 1) * (p / t[i] - 1);
    }
    if (err < best_err) best_err = err, best = x;
  }
  return best;
}

double rel_rms(const std::vector<Point>& pts, int nodes, int g, const Fabric& f) {
  double s = 0;
  for (const Point& p : pts) {
    const double m = allreduce_seconds(p.algo, p.bytes, nodes, g, f);
    s += (m / p.seconds - 1) * (m / p.seconds - 1);
  }
  return std::sqrt(s / static_cast<double>(pts.size()));
}

}  // namespace

Result<LevelFit> fit_intra(const std::vector<tuner::db::Measurement>& rows) {
  int nodes = 0, g = 0;
  auto pts = usable(rows, &nodes, &g);
  if (!pts) return pts.error();
  if (nodes != 1) return invalid_input("an intra-node fit needs a one-node sweep");
  std::vector<std::array<double, 3>> a;
  std::vector<double> t;
  for (const Point& p : *pts) {
    std::array<double, 3> coef{};
    for (size_t j = 0; j < 3; ++j) {
      Fabric unit;
      (j == 0   ? unit.intra.alpha_s
       : j == 1 ? unit.intra.beta_s_per_b
                : unit.intra.gamma_s_per_b) = 1;
      coef[j] = allreduce_seconds(p.algo, p.bytes, 1, g, unit);
    }
    a.push_back(coef);
    t.push_back(p.seconds);
  }
  const auto x = nnls3(a, t);
  LevelFit fit;
  fit.level = "intra";
  fit.nodes = 1;
  fit.ranks_per_node = g;
  fit.link = {x[0], x[1], x[2]};
  Fabric f;
  f.intra = fit.link;
  fit.rel_rms = rel_rms(*pts, 1, g, f);
  fit.points = static_cast<int>(pts->size());
  return fit;
}

Result<LevelFit> fit_inter(const std::vector<tuner::db::Measurement>& rows, const Link& intra) {
  int nodes = 0, g = 0;
  auto pts = usable(rows, &nodes, &g);
  if (!pts) return pts.error();
  if (nodes < 2) return invalid_input("an inter-node fit needs a sweep across nodes");
  std::vector<std::array<double, 3>> a;
  std::vector<double> t;
  // The reduction's cost per byte (gamma) is the cores', not the link's: the inter level
  // reduces on the same cores at the intra level's gamma. Fitting it freely split the per-byte
  // cost between beta and gamma arbitrarily (both grow with the bytes), and the link's
  // bandwidth came out above the rate tc allowed; so only alpha and beta are fitted here.
  Fabric base;
  base.intra = intra;
  base.inter.gamma_s_per_b = intra.gamma_s_per_b;
  for (const Point& p : *pts) {
    if (p.algo == AllreduceAlgo::kShm) continue;
    const double t0 = allreduce_seconds(p.algo, p.bytes, nodes, g, base);
    std::array<double, 3> coef{};  // coef[2] (gamma) stays 0: not fitted
    for (size_t j = 0; j < 2; ++j) {
      Fabric unit = base;
      (j == 0 ? unit.inter.alpha_s : unit.inter.beta_s_per_b) = 1;
      coef[j] = allreduce_seconds(p.algo, p.bytes, nodes, g, unit) - t0;
    }
    // The part of the time the inter level must explain (never below a tenth of it: a point
    // the intra level alone already over-explains still says the inter level is cheap).
    const double rest = std::max(p.seconds - t0, 0.1 * p.seconds);
    a.push_back(coef);
    t.push_back(rest);
  }
  if (t.size() < 3) return invalid_input("an inter-node fit needs at least three measurements");
  const auto x = nnls3(a, t);
  LevelFit fit;
  fit.level = "inter";
  fit.nodes = nodes;
  fit.ranks_per_node = g;
  fit.link = {x[0], x[1], intra.gamma_s_per_b};
  Fabric f = base;
  f.inter = fit.link;
  fit.rel_rms = rel_rms(*pts, nodes, g, f);
  fit.points = static_cast<int>(pts->size());
  return fit;
}

std::vector<FitPoint> fit_points(const std::vector<tuner::db::Measurement>& rows,
                                 const Fabric& fabric) {
  std::vector<FitPoint> out;
  for (const auto& m : rows) {
    AllreduceAlgo a;
    if (!row_algo(m, &a)) continue;
    const int n = static_cast<int>(m.key.shape.nodes),
              g = static_cast<int>(m.key.shape.ranks_per_node);
    out.push_back({static_cast<double>(m.bytes), m.algorithm, m.median_us * 1e-6,
                   allreduce_seconds(a, static_cast<double>(m.bytes), n, g, fabric)});
  }
  return out;
}

}  // namespace dltune::predict
