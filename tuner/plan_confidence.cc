#include "tuner/plan_confidence.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "tuner/cost_model.h"

namespace dltune::tuner {
namespace {

std::string fmt2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

stats::RatioInterval compare_trials(const std::vector<TrialRecord>& trials, size_t a, size_t b,
                                    double work_a, double work_b) {
  std::map<int, const TrialRecord*> ra, rb;  // round -> trial
  for (const TrialRecord& t : trials) {
    if (t.candidate == a) ra[t.round] = &t;
    if (t.candidate == b) rb[t.round] = &t;
  }
  std::vector<double> wa, ta, wb, tb;
  for (const auto& [round, x] : ra) {
    auto y = rb.find(round);
    if (y == rb.end()) continue;
    const auto& ca = x->chunks;
    const auto& cb = y->second->chunks;
    for (size_t k = 0; k < std::min(ca.size(), cb.size()); ++k) {
      wa.push_back(ca[k].first * work_a);
      ta.push_back(ca[k].second);
      wb.push_back(cb[k].first * work_b);
      tb.push_back(cb[k].second);
    }
  }
  return stats::paired_rate_ratio(wa, ta, wb, tb);
}

std::string describe_ratio(const stats::RatioInterval& r) {
  const std::string rounds = std::to_string(r.rounds) + (r.rounds == 1 ? " round" : " rounds");
  if (r.rounds < stats::kMinPairedRounds || !std::isfinite(r.hi)) {
    return fmt2(r.ratio) + "x (" + rounds + ": too few for an interval)";
  }
  const std::string interval = "95 % interval " + fmt2(r.lo) + "-" + fmt2(r.hi) + ", " + rounds;
  if (r.significant()) return fmt2(r.ratio) + "x (" + interval + ")";
  return fmt2(r.ratio) + "x, not a significant difference (" + interval + ")";
}

double training_regret(const std::vector<stats::RatioInterval>& rivals) {
  double regret = -1;
  for (const stats::RatioInterval& r : rivals) {
    if (r.rounds < stats::kMinPairedRounds || !std::isfinite(r.hi) || !(r.lo > 0)) continue;
    regret = std::max(regret, std::max(0.0, 1.0 / r.lo - 1.0));
  }
  return regret;
}

double collective_regret(const std::vector<CollectivePoint>& points,
                         const std::function<std::string(uint64_t)>& chosen,
                         const std::vector<std::pair<uint64_t, double>>& sizes) {
  std::map<std::string, std::map<uint64_t, double>> by;  // algo -> bytes -> seconds
  for (const CollectivePoint& p : points) {
    if (p.bytes > 0 && p.us > 0) by[p.algo][p.bytes] = p.us * 1e-6;
  }
  std::map<std::string, PiecewiseCost> models;
  for (const auto& [algo, pts] : by) {
    if (pts.size() < 2) continue;
    std::vector<std::pair<double, double>> v;
    for (const auto& [b, sec] : pts) v.emplace_back(static_cast<double>(b), sec);
    auto m = PiecewiseCost::fit(std::move(v));
    if (m) models.emplace(algo, *m);
  }
  if (models.empty()) return -1;
  auto time_of = [&](const std::string& algo, uint64_t bytes, bool optimistic) {
    std::optional<double> t;
    auto it = by.find(algo);
    if (it != by.end()) {
      auto m = it->second.find(bytes);
      if (m != it->second.end()) t = m->second;
    }
    if (!t) {
      auto mod = models.find(algo);
      if (mod != models.end()) {
        t = optimistic ? mod->second.optimistic(static_cast<double>(bytes))
                       : mod->second.predict(static_cast<double>(bytes));
      }
    }
    return t;
  };
  double mine = 0, best = 0;
  for (const auto& [bytes, weight] : sizes) {
    if (bytes == 0 || weight <= 0) continue;
    auto c = time_of(chosen(bytes), bytes, false);
    if (!c) return -1;
    double least = *c;
    for (const auto& [algo, unused] : models) {
      if (auto t = time_of(algo, bytes, true)) least = std::min(least, *t);
    }
    mine += weight * *c;
    best += weight * least;
  }
  return best > 0 ? std::max(0.0, mine / best - 1.0) : -1;
}

}  // namespace dltune::tuner
