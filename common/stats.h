// Robust statistics for measurements on a noisy machine: median, quantiles, interquartile
// range, and a distribution-free confidence interval for the median.
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

}  // namespace dltune::stats
