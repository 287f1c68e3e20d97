#include "tuner/measure.h"

#include <algorithm>
#include <cmath>

#include "common/log.h"

namespace dltune::tuner {

int Comparison::best() const {
  int best = -1;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].failed || results[i].samples.empty()) continue;
    if (best < 0 || results[i].summary.median < results[static_cast<size_t>(best)].summary.median) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

const CandidateResult* Comparison::find(const std::string& name) const {
  for (const CandidateResult& r : results) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

namespace {

// Runs one trial of candidate i, recording a failure; returns the time or a negative value.
double run_trial(const Candidate& c, CandidateResult& r, const MeasureOptions& o, double& cost) {
  Result<double> t = c.trial();
  if (!t.ok()) {
    r.failed = true;
    r.failure = t.error().message();
    DLTUNE_LOG(kInfo, "tuner") << "candidate " << c.name << " failed: " << r.failure;
    return -1;
  }
  cost += std::max(0.0, *t);
  if (!(*t >= 0) || *t > o.trial_timeout_s) {
    r.failed = true;
    r.too_slow = true;
    r.failure = "a trial took " + std::to_string(*t) + " s, over the " +
                std::to_string(o.trial_timeout_s) + " s trial timeout";
    return -1;
  }
  return *t;
}

bool converged(const std::vector<CandidateResult>& results, const MeasureOptions& o) {
  for (const CandidateResult& r : results) {
    if (r.failed) continue;
    if (stats::summarize(r.samples).rel_ci_halfwidth() > o.target_rel_ci) return false;
  }
  return true;
}

}  // namespace

Comparison measure_interleaved(const std::vector<Candidate>& candidates, const MeasureOptions& o,
                               size_t reference) {
  Comparison cmp;
  const size_t n = candidates.size();
  cmp.results.resize(n);
  for (size_t i = 0; i < n; ++i) cmp.results[i].name = candidates[i].name;
  // Per-round times (NaN where a candidate did not run), for the paired ratios.
  std::vector<std::vector<double>> per_round;

  const int total_rounds = o.warmup_rounds + o.max_rounds;
  for (int round = 0; round < total_rounds; ++round) {
    const bool warmup = round < o.warmup_rounds;
    std::vector<double> times(n, NAN);
    bool unfinished = false;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + static_cast<size_t>(round)) % n;  // rotate who goes first
      CandidateResult& r = cmp.results[i];
      if (r.failed) continue;
      const double t = run_trial(candidates[i], r, o, cmp.cost_s);
      if (t >= 0 && !warmup) {
        r.samples.push_back(t);
        times[i] = t;
      }
      if (o.stop && o.stop()) {
        cmp.stopped = true;
        for (size_t rest = k + 1; rest < n; ++rest) {
          unfinished = unfinished || !cmp.results[(rest + static_cast<size_t>(round)) % n].failed;
        }
        break;
      }
    }
    if (unfinished) {  // an unfinished round pairs nothing: drop it
      for (size_t i = 0; i < n; ++i) {
        if (!std::isnan(times[i])) cmp.results[i].samples.pop_back();
      }
      break;
    }
    if (warmup) {
      if (cmp.stopped) break;
      continue;
    }
    per_round.push_back(std::move(times));
    cmp.rounds = static_cast<int>(per_round.size());
    if (cmp.stopped) break;
    const bool all_failed = std::all_of(cmp.results.begin(), cmp.results.end(),
                                        [](const CandidateResult& r) { return r.failed; });
    if (all_failed || cmp.cost_s > o.max_cost_s) break;
    if (cmp.rounds >= o.min_rounds && converged(cmp.results, o)) break;
  }

  for (CandidateResult& r : cmp.results) r.summary = stats::summarize(r.samples);
  size_t ref = reference;
  if (ref >= n || cmp.results[ref].failed) {
    const int b = cmp.best();
    if (b < 0) return cmp;
    ref = static_cast<size_t>(b);
  }
  for (size_t i = 0; i < n; ++i) {
    if (cmp.results[i].failed) continue;
    std::vector<double> ratios;
    for (const auto& times : per_round) {
      if (std::isnan(times[i]) || std::isnan(times[ref]) || times[i] <= 0) continue;
      ratios.push_back(times[ref] / times[i]);
    }
    cmp.results[i].paired_speedup = ratios.empty() ? 0 : stats::median(ratios);
  }
  return cmp;
}

}  // namespace dltune::tuner
