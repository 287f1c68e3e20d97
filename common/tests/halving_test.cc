#include "common/halving.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace dltune::halving {
namespace {

// A synthetic field of training configurations: each candidate's true throughput (samples/s
// at one sample per step), measured with noise that shrinks with trial length (short trials
// are noisier: warm-up, fewer samples). `fails_at[i]` > 0: candidate i fails in that round.
struct Field {
  std::vector<double> truth;
  std::vector<int> fails_at;
  std::mt19937_64 rng{5};
  double noise = 0.15;
  double elapsed_s = 0;  // every measured step's time
  long long steps_run = 0;

  // Runs `s` to the end, the way engine/worker/trial.cc does: each round's candidates in
  // s.order(), every one its s.steps() steps.
  void run(Search& s) {
    while (!s.done()) {
      for (size_t i : s.order()) {
        if (s.failed(i)) continue;
        if (!fails_at.empty() && fails_at[i] == s.rounds() + 1) {
          s.fail(i, "rank 1 was killed by signal 9 (out of memory?)");
          continue;
        }
        std::normal_distribution<double> n(0.0, noise / std::sqrt(double(s.steps())));
        const double step_s = (1.0 / truth[i]) * (1.0 + n(rng));
        s.record(i, step_s * s.steps(), s.steps());
        elapsed_s += step_s * s.steps();
        steps_run += s.steps();
      }
      s.end_round(elapsed_s);
    }
  }
};

Field make_field(size_t n, unsigned seed) {
  Field f;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(1000, 5000);
  for (size_t i = 0; i < n; ++i) f.truth.push_back(u(rng));
  return f;
}

std::vector<Candidate> plain(size_t n) {
  std::vector<Candidate> c(n);
  for (size_t i = 0; i < n; ++i) c[i].group = i;
  return c;
}

Options options(int eta, int min_steps, int max_steps) {
  Options o;
  o.eta = eta;
  o.min_steps = min_steps;
  o.max_steps = max_steps;
  o.budget_s = 1e9;
  return o;
}

TEST(Halving, SurvivorsAndTrialLengths) {
  EXPECT_EQ(survivors(27, 3), 9u);
  EXPECT_EQ(survivors(16, 4), 4u);
  EXPECT_EQ(survivors(17, 4), 5u);  // rounded up
  EXPECT_EQ(survivors(3, 3), 2u);   // at least two
  EXPECT_EQ(survivors(1, 3), 1u);   // never more than the field
  EXPECT_EQ(next_steps(4, 16, 4, 64), 16);
  EXPECT_EQ(next_steps(16, 4, 2, 64), 32);
  EXPECT_EQ(next_steps(40, 4, 2, 64), 64);  // capped
  EXPECT_EQ(next_steps(4, 3, 2, 64), 6);
  EXPECT_EQ(next_steps(1, 3, 2, 64), 2);  // always longer than the last round
}

// 27 candidates, eta 3: fields 27, 9, 3, 2 with trials 8, 24, 72, 108 steps, so every round
// costs 216 steps; the search finds a near-best candidate at a fraction of the grid's cost.
TEST(Halving, FindsANearBestConfigurationCheaply) {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    Field f = make_field(27, seed);
    Search s(plain(27), options(3, 8, 108));
    std::vector<size_t> fields;
    std::vector<int> lengths;
    while (!s.done()) {
      fields.push_back(s.order().size());
      lengths.push_back(s.steps());
      for (size_t i : s.order()) s.record(i, s.steps() / f.truth[i], s.steps());
      s.end_round(0);
    }
    EXPECT_EQ(fields, (std::vector<size_t>{27, 9, 3, 2})) << "seed " << seed;
    EXPECT_EQ(lengths, (std::vector<int>{8, 24, 72, 108})) << "seed " << seed;

    Field noisy = make_field(27, seed);
    Search t(plain(27), options(3, 8, 108));
    noisy.run(t);
    ASSERT_GE(t.winner(), 0);
    const double best = *std::max_element(noisy.truth.begin(), noisy.truth.end());
    EXPECT_GE(noisy.truth[static_cast<size_t>(t.winner())] / best, 0.95) << "seed " << seed;
    // The grid measures every candidate at the longest trial length.
    EXPECT_LE(double(noisy.steps_run) / (27.0 * 108), 0.40) << "seed " << seed;
    EXPECT_FALSE(t.budget_exhausted());
  }
}

TEST(Halving, TheWinnerHasTheBestRateOverAllItsSteps) {
  Search s(plain(4), options(2, 2, 8));
  // Round 1: 0 and 1 lead. Round 2 (the final): 1 is faster over both rounds' steps.
  const double rate1[] = {100, 90, 50, 40};
  for (size_t i : s.order()) s.record(i, 2 / rate1[i], 2);
  s.end_round(0);
  ASSERT_EQ(s.order().size(), 2u);
  ASSERT_EQ(s.steps(), 4);
  const double rate2[] = {80, 120};
  for (size_t i : s.order()) s.record(i, 4 / rate2[i], 4);
  s.end_round(0);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.winner(), 1);
  EXPECT_NEAR(s.rate(1), 6 / (2 / 90.0 + 4 / 120.0), 1e-9);
  EXPECT_NEAR(s.round_step_s(1), 1 / 120.0, 1e-12);
  EXPECT_EQ(s.last_round(2), 0);
  EXPECT_EQ(s.last_round(1), 1);
}

TEST(Halving, FailedCandidatesAreDroppedWithTheirReason) {
  Field f = make_field(6, 3);
  const size_t best =
      static_cast<size_t>(std::max_element(f.truth.begin(), f.truth.end()) - f.truth.begin());
  f.fails_at.assign(6, 0);
  f.fails_at[best] = 1;
  std::vector<Candidate> c = plain(6);
  c[0].failure = best == 0 ? "" : "per_rank_batch 4096 does not fit";  // failed before it ran
  Search s(c, options(3, 4, 32));
  for (size_t i : s.order()) EXPECT_FALSE(i == 0 && best != 0) << "a failed candidate ran";
  f.run(s);
  ASSERT_GE(s.winner(), 0);
  EXPECT_NE(static_cast<size_t>(s.winner()), best);
  EXPECT_TRUE(s.failed(best));
  EXPECT_NE(s.failure(best).find("out of memory"), std::string::npos);
  if (best != 0) {
    EXPECT_EQ(s.failure(0), "per_rank_batch 4096 does not fit");
  }
}

// When every survivor of a round fails, the best eliminated candidates run that round's trial
// length again, and the winner comes from them.
TEST(Halving, EliminatedCandidatesStandInWhenEverySurvivorFails) {
  Search s(plain(8), options(2, 4, 64));
  for (size_t i : s.order()) s.record(i, 4 / (100.0 + double(i)), 4);  // 7 fastest, then 6...
  s.end_round(1);
  std::vector<size_t> second = s.order();
  std::sort(second.begin(), second.end());
  ASSERT_EQ(second, (std::vector<size_t>{4, 5, 6, 7}));
  ASSERT_EQ(s.steps(), 8);
  for (size_t i : s.order()) s.fail(i, "diverged: the loss is not finite");
  s.end_round(2);
  ASSERT_FALSE(s.done());
  EXPECT_EQ(s.steps(), 8);  // the same trial length again
  std::vector<size_t> third = s.order();
  std::sort(third.begin(), third.end());
  EXPECT_EQ(third, (std::vector<size_t>{0, 1, 2, 3}));
  for (size_t i : s.order()) s.record(i, 8 / (100.0 + double(i)), 8);
  s.end_round(3);
  EXPECT_FALSE(s.done());  // four stand-ins: halve again, to two finalists
  for (size_t i : s.order()) s.record(i, 16 / (100.0 + double(i)), 16);
  s.end_round(4);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.winner(), 3);
}

// A candidate set aside (a model predicted it out of the race) leaves the field without a
// trial: the survivors are taken from the measured ones only, it cannot win, and it runs only
// when every measured candidate has failed.
TEST(Halving, SetAsideCandidatesLeaveTheFieldUnmeasured) {
  Search s(plain(8), options(4, 4, 64));
  for (size_t i : s.order()) {
    if (i >= 5) {
      s.set_aside(i);
      EXPECT_TRUE(s.set_aside_now(i));
      continue;
    }
    s.record(i, 4 / (100.0 + double(i)), 4);
  }
  s.end_round(1);
  // Five measured: ceil(5 / 4) = 2 finalists (of 8 it would have kept 2 as well, but at
  // 4 x 8 / 2 = 16 steps; the field of 5 grows the trial to 4 x 5 / 2 = 10).
  std::vector<size_t> second = s.order();
  std::sort(second.begin(), second.end());
  ASSERT_EQ(second, (std::vector<size_t>{3, 4}));
  EXPECT_EQ(s.steps(), 10);
  EXPECT_EQ(s.last_round(7), -1);  // it never ran
  for (size_t i : s.order()) s.record(i, 10 / (100.0 + double(i)), 10);
  s.end_round(2);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.winner(), 4);

  // Every measured candidate fails: the set-aside run the round again, the measured
  // eliminated ones (none here) ahead of them.
  Search t(plain(4), options(2, 4, 64));
  for (size_t i : t.order()) {
    if (i < 2) {
      t.fail(i, "exited with code 1");
    } else {
      t.set_aside(i);
    }
  }
  t.end_round(1);
  ASSERT_FALSE(t.done());
  std::vector<size_t> again = t.order();
  std::sort(again.begin(), again.end());
  EXPECT_EQ(again, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(t.steps(), 4);
  EXPECT_FALSE(t.set_aside_now(2));
  for (size_t i : t.order()) t.record(i, 4 / (10.0 * double(i)), 4);
  t.end_round(2);
  EXPECT_TRUE(t.done());
  EXPECT_EQ(t.winner(), 3);
  // No effect on a failed candidate.
  Search u(plain(2), options(2, 4, 64));
  u.fail(0, "boom");
  u.set_aside(0);
  EXPECT_FALSE(u.set_aside_now(0));
}

TEST(Halving, EveryCandidateFailedLeavesNoWinner) {
  Search s(plain(3), options(2, 4, 16));
  for (size_t i : s.order()) s.fail(i, "timed out");
  s.end_round(1);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.winner(), -1);
  std::vector<Candidate> none(2);
  none[0].failure = none[1].failure = "bad batch";
  Search t(none, options(2, 4, 16));
  EXPECT_TRUE(t.done());
  EXPECT_TRUE(t.order().empty());
  EXPECT_EQ(t.winner(), -1);
}

// No round starts whose estimate (its candidates' last step times x its trial length) would
// end past the budget; the winner is then the best of the last round run.
TEST(Halving, TheBudgetStopsBeforeARoundThatWouldOverrunIt) {
  Options o = options(3, 8, 108);
  o.budget_s = 27 * 8 * 0.01 + 9 * 24 * 0.01 - 0.05;  // the first round, not the second
  Search s(plain(27), o);
  double elapsed = 0;
  for (size_t i : s.order()) {
    s.record(i, 8 * 0.01 * (1 + double(i) / 100), 8);
    elapsed += 8 * 0.01 * (1 + double(i) / 100);
  }
  s.end_round(elapsed);
  EXPECT_TRUE(s.done());
  EXPECT_TRUE(s.budget_exhausted());
  EXPECT_EQ(s.rounds(), 1);
  EXPECT_EQ(s.winner(), 0);  // the fastest step time
  EXPECT_TRUE(s.within_budget(elapsed, 0.04));
  EXPECT_FALSE(s.within_budget(elapsed, 2.0));
}

TEST(Halving, ARoundCutShortByTheBudgetEndsTheSearch) {
  Search s(plain(5), options(2, 4, 16));
  for (size_t i : s.order()) s.record(i, 2 / (10.0 + double(i)), 2);  // half the round
  s.end_round(100, /*cut_short=*/true);
  EXPECT_TRUE(s.done());
  EXPECT_TRUE(s.budget_exhausted());
  EXPECT_EQ(s.winner(), 4);
}

TEST(Halving, TheGridRunsEveryCandidateOnceAtTheLongestTrial) {
  Options o = options(4, 4, 48);
  o.grid = true;
  Search s(plain(6), o);
  EXPECT_EQ(s.order().size(), 6u);
  EXPECT_EQ(s.steps(), 48);
  for (size_t i : s.order()) s.record(i, 48 / (1.0 + double(i == 2)), 48);
  s.end_round(10);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.winner(), 2);
}

// A group's members are spread apart and the order rotates every round.
TEST(Halving, TheOrderSpreadsGroupsAndRotates) {
  std::vector<Candidate> c(6);
  const size_t groups[] = {0, 0, 0, 1, 1, 2};
  for (size_t i = 0; i < 6; ++i) c[i].group = groups[i];
  Options o = options(2, 2, 64);
  Search s(c, o);
  EXPECT_EQ(s.order(), (std::vector<size_t>{0, 3, 5, 1, 4, 2}));
  for (size_t i : s.order()) s.record(i, 2 / (1.0 + double(i)), 2);  // 5, 4, 3 survive
  s.end_round(0);
  EXPECT_EQ(s.order(), (std::vector<size_t>{4, 3, 5}));  // spread 5, 4, 3; rotated by one
}

TEST(Halving, OptionsAreChecked) {
  EXPECT_TRUE(validate(Options{}).ok());
  Options bad;
  bad.eta = 1;
  EXPECT_NE(validate(bad).error().message().find("eta >= 2"), std::string::npos);
  bad = Options{};
  bad.min_steps = 10;
  bad.max_steps = 5;
  EXPECT_NE(validate(bad).error().message().find("min_steps <= max_steps"), std::string::npos);
  bad = Options{};
  bad.budget_s = 0;
  EXPECT_FALSE(validate(bad).ok());
  bad = Options{};
  bad.warmup_steps = -1;
  EXPECT_FALSE(validate(bad).ok());
}

}  // namespace
}  // namespace dltune::halving
