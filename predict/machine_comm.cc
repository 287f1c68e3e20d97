#include "predict/machine_comm.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "common/stats.h"

namespace dltune::predict {
namespace {

using Shape = std::pair<int, int>;

std::map<Shape, std::vector<tuner::db::Measurement>> by_shape(
    const std::vector<tuner::db::Measurement>& rows) {
  std::map<Shape, std::vector<tuner::db::Measurement>> out;
  for (const auto& m : rows) {
    if (m.failed || m.collective != "allreduce" || m.median_us <= 0) continue;
    out[{static_cast<int>(m.key.shape.nodes), static_cast<int>(m.key.shape.ranks_per_node)}]
        .push_back(m);
  }
  return out;
}

// The fit of `level` nearest `g` ranks per node (the larger on a tie; for inter, the most
// nodes among equals), or null.
const LevelFit* nearest(const std::vector<LevelFit>& fits, const std::string& level, int g) {
  const LevelFit* best = nullptr;
  for (const LevelFit& f : fits) {
    if (f.level != level) continue;
    if (best == nullptr) {
      best = &f;
      continue;
    }
    const int d = std::abs(f.ranks_per_node - g), bd = std::abs(best->ranks_per_node - g);
    if (d < bd || (d == bd && f.ranks_per_node > best->ranks_per_node) ||
        (d == bd && f.ranks_per_node == best->ranks_per_node && f.nodes > best->nodes)) {
      best = &f;
    }
  }
  return best;
}

// The sweep's spread at one shape: the median over its sizes of 1 MiB and more (gradient
// buckets; all sizes when it has none) of each size's (p90 - p10) / 2 / median. 0 when no row
// has percentiles.
double sweep_spread(const std::vector<tuner::db::Measurement>& ms) {
  std::vector<double> big, all;
  for (const auto& m : ms) {
    if (m.median_us <= 0 || m.p90_us <= 0 || m.p10_us <= 0 || m.p90_us < m.p10_us) continue;
    const double s = (m.p90_us - m.p10_us) / 2 / m.median_us;
    all.push_back(s);
    if (m.bytes >= (1u << 20)) big.push_back(s);
  }
  const std::vector<double>& v = big.empty() ? all : big;
  return v.empty() ? 0 : stats::median(v);
}

}  // namespace

std::vector<LevelFit> fit_all_levels(const std::vector<tuner::db::Measurement>& rows) {
  const auto shapes = by_shape(rows);
  std::vector<LevelFit> fits;
  for (const auto& [shape, ms] : shapes) {
    if (shape.first != 1 || shape.second < 2) continue;
    if (auto f = fit_intra(ms)) fits.push_back(*f);
  }
  std::vector<LevelFit> inter;
  for (const auto& [shape, ms] : shapes) {
    if (shape.first < 2) continue;
    const LevelFit* in = nearest(fits, "intra", shape.second);
    if (auto f = fit_inter(ms, in ? in->link : Link{})) inter.push_back(*f);
  }
  fits.insert(fits.end(), inter.begin(), inter.end());
  return fits;
}

MachineComm machine_comm(const std::vector<tuner::db::Measurement>& rows,
                         const std::vector<LevelFit>& stored, int per_node) {
  MachineComm mc;
  mc.fits = stored;
  // Shapes the stored fits do not cover are fitted now.
  for (const LevelFit& f : fit_all_levels(rows)) {
    const bool known = std::any_of(stored.begin(), stored.end(), [&](const LevelFit& s) {
      return s.level == f.level && s.nodes == f.nodes && s.ranks_per_node == f.ranks_per_node;
    });
    if (!known) mc.fits.push_back(f);
  }
  for (const auto& [shape, ms] : by_shape(rows)) {
    std::map<std::string, std::vector<std::pair<double, double>>> curves;
    for (const auto& m : ms) {
      if (m.algorithm == "native") continue;  // Open MPI's own: not what dltune's ranks run
      const std::string name =
          m.segment_bytes > 0 ? m.algorithm + "/" + std::to_string(m.segment_bytes) : m.algorithm;
      curves[name].emplace_back(static_cast<double>(m.bytes), m.median_us * 1e-6);
    }
    for (auto& [algo, pts] : curves) {
      std::sort(pts.begin(), pts.end());
      pts.erase(std::unique(pts.begin(), pts.end(),
                            [](const auto& a, const auto& b) { return a.first == b.first; }),
                pts.end());
      if (auto c = tuner::PiecewiseCost::fit(pts)) mc.source.measured[shape][algo] = *c;
    }
    if (mc.source.measured.count(shape)) mc.source.measured_spread[shape] = sweep_spread(ms);
  }
  const LevelFit* intra = nearest(mc.fits, "intra", per_node);
  const LevelFit* inter = nearest(mc.fits, "inter", per_node);
  mc.has_intra = intra != nullptr;
  mc.has_inter = inter != nullptr;
  if (!mc.has_intra && mc.has_inter) {  // the inter fit carries the node-local part
    mc.intra_free = true;
    mc.has_intra = true;
  }
  if (intra) mc.source.fabric.intra = intra->link;
  if (inter) mc.source.fabric.inter = inter->link;
  // Elsewhere the fits' error: twice the larger RMS relative residual of the levels used.
  const LevelFit* worst = nullptr;
  for (const LevelFit* f : {intra, inter}) {
    if (f != nullptr && (worst == nullptr || f->rel_rms > worst->rel_rms)) worst = f;
  }
  if (worst != nullptr) {
    mc.source.model_spread = 2 * worst->rel_rms;
    mc.source.model_spread_basis = "twice the " + worst->level + " fit's RMS error";
  }
  return mc;
}

}  // namespace dltune::predict
