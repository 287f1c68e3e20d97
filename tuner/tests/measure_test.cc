#include "tuner/measure.h"

#include <random>

#include <gtest/gtest.h>

namespace dltune::tuner {
namespace {

// Candidate B is 10 % slower than A; the machine alternates between normal and 4x slower
// phases that last a few trials. Paired ratios see through the phases.
TEST(MeasureInterleaved, PairedRatioSeesThroughSlowPhases) {
  int trial = 0;
  auto phase = [&trial] { return ((trial++ / 4) % 3 == 2) ? 4.0 : 1.0; };
  std::vector<Candidate> c = {{"a", [&]() -> Result<double> { return 1e-3 * phase(); }},
                              {"b", [&]() -> Result<double> { return 1.1e-3 * phase(); }}};
  MeasureOptions o;
  o.max_rounds = 30;
  o.min_rounds = 30;
  Comparison cmp = measure_interleaved(c, o, /*reference=*/1);
  ASSERT_EQ(cmp.results.size(), 2u);
  EXPECT_EQ(cmp.best(), 0);
  EXPECT_NEAR(cmp.results[0].paired_speedup, 1.1, 0.12);
  EXPECT_DOUBLE_EQ(cmp.results[1].paired_speedup, 1.0);
  EXPECT_EQ(cmp.rounds, 30);
  EXPECT_EQ(cmp.results[0].samples.size(), 30u);
  // Warm-up rounds are run (and cost time) but not kept.
  EXPECT_NEAR(cmp.cost_s, 0.0, 1.0);
  EXPECT_EQ(trial, 2 * (30 + o.warmup_rounds));
}

TEST(MeasureInterleaved, StopsWhenTheMedianIsKnown) {
  std::vector<Candidate> c = {{"steady", []() -> Result<double> { return 2e-3; }}};
  MeasureOptions o;
  Comparison cmp = measure_interleaved(c, o);
  EXPECT_EQ(cmp.rounds, o.min_rounds);
  EXPECT_DOUBLE_EQ(cmp.results[0].summary.median, 2e-3);
}

// The stop hook ends a comparison right after the trial that asked: a round it cut short is
// dropped (it pairs nothing), a round it ended at its last trial is kept.
TEST(MeasureInterleaved, StopHookEndsAfterTheTrialAndDropsAnUnfinishedRound) {
  for (const int stop_after : {5, 6}) {
    int trials = 0;
    std::vector<Candidate> c = {{"a",
                                 [&]() -> Result<double> {
                                   ++trials;
                                   return 1e-3;
                                 }},
                                {"b", [&]() -> Result<double> {
                                   ++trials;
                                   return 2e-3;
                                 }}};
    MeasureOptions o;
    o.warmup_rounds = 1;
    o.max_rounds = 30;
    o.stop = [&] { return trials >= stop_after; };
    Comparison cmp = measure_interleaved(c, o);
    EXPECT_EQ(trials, stop_after);  // not one trial more
    EXPECT_TRUE(cmp.stopped);
    // Trials 1-2 warm up, 3-4 are round 1, 5-6 round 2.
    const size_t rounds = stop_after == 5 ? 1 : 2;
    EXPECT_EQ(cmp.rounds, static_cast<int>(rounds));
    EXPECT_EQ(cmp.results[0].samples.size(), rounds);
    EXPECT_EQ(cmp.results[1].samples.size(), rounds);
    EXPECT_EQ(cmp.best(), 0);
  }
}

TEST(MeasureInterleaved, FailuresAreRecordedAndTheOthersGoOn) {
  int crash_calls = 0;
  std::vector<Candidate> c = {
      {"crashes",
       [&]() -> Result<double> {
         if (++crash_calls > 3) return peer_failed("rank 1 exited with signal 9");
         return 1e-3;
       }},
      {"slow", []() -> Result<double> { return 120.0; }},
      {"fine", []() -> Result<double> { return 3e-3; }},
  };
  MeasureOptions o;
  o.trial_timeout_s = 60;
  o.max_cost_s = 1e9;
  Comparison cmp = measure_interleaved(c, o);
  EXPECT_TRUE(cmp.results[0].failed);
  EXPECT_EQ(cmp.results[0].failure, "rank 1 exited with signal 9");
  EXPECT_EQ(crash_calls, 4);  // never tried again after the failure
  EXPECT_TRUE(cmp.results[1].failed);
  EXPECT_NE(cmp.results[1].failure.find("trial timeout"), std::string::npos);
  EXPECT_FALSE(cmp.results[2].failed);
  EXPECT_EQ(cmp.best(), 2);
  EXPECT_EQ(*cmp.find("fine")->samples.begin(), 3e-3);
  EXPECT_EQ(cmp.find("nope"), nullptr);
}

TEST(MeasureInterleaved, AllFailedHasNoBest) {
  std::vector<Candidate> c = {{"x", []() -> Result<double> { return timeout_error("no answer"); }}};
  Comparison cmp = measure_interleaved(c, MeasureOptions{});
  EXPECT_EQ(cmp.best(), -1);
  EXPECT_TRUE(cmp.results[0].failed);
}

TEST(MeasureInterleaved, CostCapEndsEarly) {
  std::vector<Candidate> c = {{"a", []() -> Result<double> { return 1.0; }},
                              {"b", []() -> Result<double> { return 1.5; }}};
  MeasureOptions o;
  o.max_cost_s = 10;
  o.target_rel_ci = 0;  // never "converged"
  Comparison cmp = measure_interleaved(c, o);
  EXPECT_LE(cmp.cost_s, 10 + 2.5);
  EXPECT_GE(cmp.rounds, 1);
}

}  // namespace
}  // namespace dltune::tuner
