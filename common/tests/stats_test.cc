#include "common/stats.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace dltune::stats {
namespace {

TEST(Stats, QuantilesMatchNumpyType7) {
  // numpy.percentile([1, 2, 3, 4, 10], [10, 25, 50, 75, 90]) = [1.4, 2, 3, 4, 7.6]
  const std::vector<double> v = {10, 1, 4, 3, 2};
  Summary s = summarize(v);
  EXPECT_EQ(s.n, 5u);
  EXPECT_DOUBLE_EQ(s.p10, 1.4);
  EXPECT_DOUBLE_EQ(s.q1, 2);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  EXPECT_DOUBLE_EQ(s.p90, 7.6);
  EXPECT_DOUBLE_EQ(s.iqr, 2);
  EXPECT_DOUBLE_EQ(s.mean, 4);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(Stats, OutliersDoNotMoveTheMedian) {
  std::vector<double> v(51, 1.0);
  for (int i = 0; i < 10; ++i) v[static_cast<size_t>(i)] = 1000.0;  // a slow phase
  Summary s = summarize(v);
  EXPECT_DOUBLE_EQ(s.median, 1.0);
  EXPECT_GT(s.mean, 100.0);
}

TEST(Stats, MedianCiShrinksWithSamplesAndCoversTheTruth) {
  std::mt19937 rng(7);
  std::lognormal_distribution<double> d(0.0, 0.2);  // median exp(0) = 1
  auto ci_width = [&](size_t n) {
    std::vector<double> v(n);
    for (double& x : v) x = d(rng);
    Summary s = summarize(v);
    EXPECT_LE(s.median_ci_lo, s.median);
    EXPECT_GE(s.median_ci_hi, s.median);
    return s.rel_ci_halfwidth();
  };
  const double w10 = ci_width(10), w1000 = ci_width(1000);
  EXPECT_LT(w1000, w10 / 4);
  // Coverage: over 200 experiments of n = 50 the 95 % CI should contain 1.0 most of the time.
  int covered = 0;
  for (int e = 0; e < 200; ++e) {
    std::vector<double> v(50);
    for (double& x : v) x = d(rng);
    Summary s = summarize(v);
    covered += (s.median_ci_lo <= 1.0 && 1.0 <= s.median_ci_hi);
  }
  EXPECT_GE(covered, 180);
}

TEST(Stats, EmptyAndSingle) {
  EXPECT_EQ(summarize({}).n, 0u);
  Summary one = summarize({3.0});
  EXPECT_EQ(one.median, 3.0);
  EXPECT_EQ(one.median_ci_lo, 3.0);
  EXPECT_EQ(one.median_ci_hi, 3.0);
}

// Batch means: a constant series is known exactly; independent noise of sd 10 % over 1000
// steps gives about 1.96 x 0.1 / sqrt(1000) = 0.6 %; a slow phase lasting a fifth of the run
// (correlated steps) widens the interval far beyond what independent steps would give.
TEST(Stats, MeanConfidenceByBatchMeans) {
  EXPECT_DOUBLE_EQ(mean_rel_ci_batched(std::vector<double>(100, 2.0)), 0.0);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(1.0, 0.1);
  std::vector<double> iid(1000);
  for (double& x : iid) x = noise(rng);
  const double ci = mean_rel_ci_batched(iid);
  EXPECT_GT(ci, 0.003);
  EXPECT_LT(ci, 0.012);
  std::vector<double> phased = iid;
  for (size_t i = 400; i < 600; ++i) phased[i] *= 3;  // 200 steps in a 3x slower phase
  EXPECT_GT(mean_rel_ci_batched(phased), 0.15);
  EXPECT_TRUE(std::isinf(mean_rel_ci_batched({1, 2, 3})));  // fewer than 2 per batch
  EXPECT_TRUE(std::isinf(mean_rel_ci_batched(iid, 1)));     // one batch
  EXPECT_TRUE(std::isinf(mean_rel_ci_batched(std::vector<double>(40, -1.0))));
}

}  // namespace
}  // namespace dltune::stats
