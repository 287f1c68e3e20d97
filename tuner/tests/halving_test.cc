#include "tuner/halving.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace dltune::tuner {
namespace {

// A synthetic grid of training configurations: true throughput per candidate, measured with
// noise that shrinks with trial length (short trials are noisier: warm-up, fewer samples).
struct SyntheticGrid {
  std::vector<double> truth;
  std::mt19937_64 rng{5};
  double seconds_per_step = 0.05;
  Result<TrialOutcome> run(size_t i, int steps) {
    std::normal_distribution<double> noise(0.0, 0.15 / std::sqrt(static_cast<double>(steps)));
    return TrialOutcome{truth[i] * (1.0 + noise(rng)), seconds_per_step * steps};
  }
};

SyntheticGrid make_grid(size_t n, unsigned seed) {
  SyntheticGrid g;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(1000, 5000);
  for (size_t i = 0; i < n; ++i) g.truth.push_back(u(rng));
  return g;
}

TEST(Halving, FindsANearBestConfigurationCheaply) {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    SyntheticGrid g = make_grid(27, seed);
    HalvingOptions o;
    o.min_steps = 8;
    o.max_steps = 72;
    o.budget_s = 1e9;
    auto r = successive_halving(
        g.truth.size(), [&](size_t i, int s) { return g.run(i, s); }, o);
    ASSERT_TRUE(r.ok());
    const double best = *std::max_element(g.truth.begin(), g.truth.end());
    EXPECT_GE(g.truth[r->ranking.front().index] / best, 0.95) << "seed " << seed;
    // The full grid measures every candidate at the longest trial length.
    const double grid_cost = static_cast<double>(g.truth.size()) * o.max_steps * g.seconds_per_step;
    EXPECT_LE(r->cost_s / grid_cost, 0.40) << "seed " << seed;
    EXPECT_EQ(r->rounds, 3);  // 27 -> 9 -> 3 -> 1
  }
}

TEST(Halving, FailedCandidatesAreDroppedWithTheirReason) {
  SyntheticGrid g = make_grid(6, 3);
  const size_t best =
      static_cast<size_t>(std::max_element(g.truth.begin(), g.truth.end()) - g.truth.begin());
  auto trial = [&](size_t i, int s) -> Result<TrialOutcome> {
    if (i == best) return peer_failed("rank 1 was killed by signal 9 (out of memory?)");
    return g.run(i, s);
  };
  auto r = successive_halving(g.truth.size(), trial, HalvingOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->ranking.front().index, best);
  EXPECT_TRUE(r->ranking.back().failed);
  EXPECT_NE(r->ranking.back().failure.find("out of memory"), std::string::npos);
}

TEST(Halving, BudgetStopsEarly) {
  SyntheticGrid g = make_grid(27, 2);
  HalvingOptions o;
  o.budget_s = 1.0;  // less than the first round costs
  auto r = successive_halving(
      g.truth.size(), [&](size_t i, int s) { return g.run(i, s); }, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->budget_exhausted);
  EXPECT_EQ(r->rounds, 1);
  // Still a sensible answer: the best of the first round.
  EXPECT_GE(r->ranking.front().samples_per_s, r->ranking[1].samples_per_s);
}

TEST(Halving, ErrorsAreClear) {
  auto ok_trial = [](size_t, int) -> Result<TrialOutcome> { return TrialOutcome{1, 1}; };
  EXPECT_FALSE(successive_halving(0, ok_trial, HalvingOptions{}).ok());
  HalvingOptions bad;
  bad.eta = 1;
  EXPECT_FALSE(successive_halving(3, ok_trial, bad).ok());
  auto all_fail = [](size_t, int) -> Result<TrialOutcome> {
    return timeout_error("trial timed out");
  };
  auto r = successive_halving(2, all_fail, HalvingOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("every candidate configuration failed"), std::string::npos);
  EXPECT_NE(r.error().message().find("trial timed out"), std::string::npos);
}

}  // namespace
}  // namespace dltune::tuner
