#include "common/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "common/check.h"

namespace dltune::stats {

double Summary::rel_ci_halfwidth() const {
  if (n == 0 || median <= 0) return INFINITY;
  return (median_ci_hi - median_ci_lo) / (2.0 * median);
}

double quantile_sorted(const std::vector<double>& sorted, double q) {
  DLTUNE_CHECK(!sorted.empty(), "quantile of no samples");
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return quantile_sorted(values, 0.5);
}

Summary summarize(std::vector<double> s) {
  Summary out;
  out.n = s.size();
  if (s.empty()) return out;
  std::sort(s.begin(), s.end());
  out.median = quantile_sorted(s, 0.5);
  out.p10 = quantile_sorted(s, 0.10);
  out.p90 = quantile_sorted(s, 0.90);
  out.q1 = quantile_sorted(s, 0.25);
  out.q3 = quantile_sorted(s, 0.75);
  out.iqr = out.q3 - out.q1;
  out.min = s.front();
  out.max = s.back();
  out.mean = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
  // The median lies between order statistics j and k (1-based) with ~95 % probability, where
  // j, k = n/2 -+ 1.96 sqrt(n)/2 (the binomial(n, 1/2) count below the median, normal approx.).
  const double n = static_cast<double>(s.size());
  const double half = 1.96 * std::sqrt(n) / 2.0;
  const long j = std::max(1L, static_cast<long>(std::floor(n / 2.0 - half)));
  const long k =
      std::min(static_cast<long>(s.size()), static_cast<long>(std::ceil(n / 2.0 + half)) + 1);
  out.median_ci_lo = s[static_cast<size_t>(j - 1)];
  out.median_ci_hi = s[static_cast<size_t>(k - 1)];
  return out;
}

double mean_rel_ci_batched(const std::vector<double>& series, int batches) {
  if (batches < 2) return INFINITY;
  const size_t per = series.size() / static_cast<size_t>(batches);
  if (per < 2) return INFINITY;
  std::vector<double> means(static_cast<size_t>(batches), 0.0);
  for (size_t b = 0; b < means.size(); ++b) {
    for (size_t i = 0; i < per; ++i) means[b] += series[b * per + i];
    means[b] /= static_cast<double>(per);
  }
  const double k = static_cast<double>(batches);
  const double mean = std::accumulate(means.begin(), means.end(), 0.0) / k;
  if (!(mean > 0)) return INFINITY;
  double ss = 0;
  for (double m : means) ss += (m - mean) * (m - mean);
  const double se = std::sqrt(ss / (k - 1)) / std::sqrt(k);
  // Student's t, two-sided 95 %, for batches - 1 degrees of freedom (1.96 from 30 on).
  static constexpr double kT[] = {12.706, 4.303, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262,
                                  2.228,  2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110,
                                  2.101,  2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060,
                                  2.056,  2.052, 2.048, 2.045, 2.042};
  const size_t df = static_cast<size_t>(batches - 1);
  const double t = df <= std::size(kT) ? kT[df - 1] : 1.96;
  return t * se / mean;
}

RatioInterval paired_rate_ratio(const std::vector<double>& work_a,
                                const std::vector<double>& time_a,
                                const std::vector<double>& work_b,
                                const std::vector<double>& time_b, int resamples) {
  struct Round {
    double wa, ta, wb, tb;
  };
  std::vector<Round> rounds;
  const size_t n = std::min({work_a.size(), time_a.size(), work_b.size(), time_b.size()});
  for (size_t i = 0; i < n; ++i) {
    if (time_a[i] > 0 && time_b[i] > 0)
      rounds.push_back({work_a[i], time_a[i], work_b[i], time_b[i]});
  }
  RatioInterval out;
  out.rounds = static_cast<int>(rounds.size());
  auto ratio = [](double wa, double ta, double wb, double tb) {
    return ta > 0 && tb > 0 && wb > 0 ? (wa / ta) / (wb / tb) : 0.0;
  };
  double wa = 0, ta = 0, wb = 0, tb = 0;
  for (const Round& r : rounds) wa += r.wa, ta += r.ta, wb += r.wb, tb += r.tb;
  out.ratio = ratio(wa, ta, wb, tb);
  out.lo = 0;
  out.hi = INFINITY;
  if (out.rounds < kMinPairedRounds || resamples < 10) return out;
  // splitmix64: small, fast, and the same sequence everywhere.
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  std::vector<double> draws;
  draws.reserve(static_cast<size_t>(resamples));
  const uint64_t m = rounds.size();
  for (int d = 0; d < resamples; ++d) {
    double a = 0, b = 0, c = 0, e = 0;
    for (uint64_t i = 0; i < m; ++i) {
      const Round& r = rounds[next() % m];
      a += r.wa, b += r.ta, c += r.wb, e += r.tb;
    }
    draws.push_back(ratio(a, b, c, e));
  }
  std::sort(draws.begin(), draws.end());
  out.lo = quantile_sorted(draws, 0.025);
  out.hi = quantile_sorted(draws, 0.975);
  return out;
}

}  // namespace dltune::stats
