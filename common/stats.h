// Robust statistics for measurements on a noisy machine: median, quantiles, interquartile
// range, a distribution-free confidence interval for the median, and paired comparisons.
#pragma once

#include <cstddef>
#include <vector>

namespace dltune::stats {

struct Summary {
  size_t n = 0;
  double median = 0, p10 = 0, p90 = 0, q1 = 0, q3 = 0, iqr = 0;
  double min = 0, max = 0, mean = 0;
  // ~95 % confidence interval of the median from order statistics (binomial, normal
  // approximation); equal to [min, max] when n is too small for a tighter statement.
  double median_ci_lo = 0, median_ci_hi = 0;
  // Half the CI width relative to the median: 0.02 means "median known to about +-2 %".
  double rel_ci_halfwidth() const;
};

// Quantile q in [0, 1] of ascending-sorted `sorted` with linear interpolation between order
// statistics (the "type 7" definition of R and NumPy). Precondition: sorted is non-empty.
double quantile_sorted(const std::vector<double>& sorted, double q);
// Median of `values` (copied and sorted). Precondition: non-empty.
double median(std::vector<double> values);
// Summary of `samples`; an empty input gives a Summary with n = 0 and zeros elsewhere.
Summary summarize(std::vector<double> samples);

// The ~95 % confidence interval of the mean of `series`, a run of measurements in time order
// whose neighbours are correlated (this machine's slow phases last many steps, so the steps
// are not independent): the method of batch means, Student's t over the means of `batches`
// consecutive batches of equal length (the last series % batches values are left out).
// Returns the half-width relative to the mean: 0.05 means "mean known to +-5 %". Infinity
// when the series has fewer than 2 values per batch, batches < 2, or a mean <= 0.
double mean_rel_ci_batched(const std::vector<double>& series, int batches = 10);

// How much faster A is than B, measured in the same rounds: each round r ran A for time_a[r]
// seconds doing work_a[r] (samples), and B alike, next to each other, so that both saw the
// same machine phase. ratio = (sum work_a / sum time_a) / (sum work_b / sum time_b): the ratio
// of their rates over every round (> 1: A faster). [lo, hi]: its ~95 % interval by the paired
// percentile bootstrap (whole rounds resampled with replacement, so a slow phase stays paired;
// `resamples` draws from a fixed seed: the same input gives the same interval everywhere).
// Rounds with a time <= 0 on either side are left out. With fewer than kMinPairedRounds
// rounds the interval is unknown: lo 0, hi infinity.
struct RatioInterval {
  double ratio = 0, lo = 0, hi = 0;
  int rounds = 0;
  // Whether the interval excludes 1 (A faster, or slower, beyond the noise).
  bool significant() const { return rounds > 0 && (lo > 1.0 || hi < 1.0); }
};
inline constexpr int kMinPairedRounds = 3;
RatioInterval paired_rate_ratio(const std::vector<double>& work_a,
                                const std::vector<double>& time_a,
                                const std::vector<double>& work_b,
                                const std::vector<double>& time_b, int resamples = 2000);

}  // namespace dltune::stats
