// How sure the tuner says it is: paired intervals from the trials' cycles, the reason that
// states them, the plan's confidence and regret, and the collectives' regret from the sweep.
#include "tuner/plan_confidence.h"

#include <cmath>

#include <gtest/gtest.h>

namespace dltune::tuner {
namespace {

using json = nlohmann::json;

// A trial of candidate c in `round` with `cycles` chunks of 2 steps of `step_s` seconds each,
// each cycle's time multiplied by the machine's phase in that cycle (shared by every candidate
// of the cycle) and a little noise of its own.
TrialRecord trial(size_t c, int round, int cycles, double step_s, unsigned seed) {
  TrialRecord t;
  t.candidate = c;
  t.label = "c" + std::to_string(c);
  t.round = round;
  for (int k = 0; k < cycles; ++k) {
    const double phase = 1.0 + 0.6 * ((k * 7 + round * 3) % 5) / 4.0;  // slow phases: up to 1.6x
    // Zero-mean over every 5 cycles, shifted by the seed so that candidates differ.
    const double noise = 1.0 + 0.01 * ((k + static_cast<int>(seed)) % 5 - 2);
    t.chunks.emplace_back(2, 2 * step_s * phase * noise);
  }
  double sec = 0;
  for (const auto& [n, s] : t.chunks) sec += s;
  t.steps = 2 * cycles;
  t.step_s = sec / t.steps;
  t.samples_per_s = 128 / t.step_s;
  return t;
}

TEST(PlanConfidence, PairedCyclesSeparateCandidatesTheMachinesPhasesWouldBlur) {
  // c0 is 10 % faster than c1; the machine's phases move both by up to 60 % per cycle.
  const std::vector<TrialRecord> ts = {trial(0, 0, 12, 0.010, 1), trial(1, 0, 12, 0.011, 2)};
  const stats::RatioInterval r = compare_trials(ts, 0, 1, 128, 128);
  EXPECT_EQ(r.rounds, 12);
  EXPECT_NEAR(r.ratio, 1.1, 0.02);
  EXPECT_GT(r.lo, 1.0);  // significant although single cycles vary by 60 %
  EXPECT_LT(r.hi, 1.2);
  EXPECT_TRUE(r.significant());
  const std::string text = describe_ratio(r);
  EXPECT_NE(text.find("x (95 % interval 1."), std::string::npos) << text;
  EXPECT_NE(text.find(", 12 rounds)"), std::string::npos) << text;
}

TEST(PlanConfidence, AlikeCandidatesAreNotASignificantDifference) {
  const std::vector<TrialRecord> ts = {trial(0, 0, 10, 0.010, 1), trial(1, 0, 10, 0.010, 4)};
  const stats::RatioInterval r = compare_trials(ts, 0, 1, 128, 128);
  EXPECT_FALSE(r.significant());
  EXPECT_NE(describe_ratio(r).find("not a significant difference (95 % interval"),
            std::string::npos)
      << describe_ratio(r);
  // Two cycles are too few for an interval.
  const std::vector<TrialRecord> two = {trial(0, 0, 2, 0.010, 1), trial(1, 0, 2, 0.02, 2)};
  const stats::RatioInterval s = compare_trials(two, 0, 1, 128, 128);
  EXPECT_EQ(s.rounds, 2);
  EXPECT_FALSE(s.significant());
  EXPECT_NE(describe_ratio(s).find("2 rounds: too few for an interval"), std::string::npos);
  // Trials without chunks (older trial programs): nothing to pair.
  std::vector<TrialRecord> old = two;
  for (auto& t : old) t.chunks.clear();
  EXPECT_EQ(compare_trials(old, 0, 1, 128, 128).rounds, 0);
}

TEST(PlanConfidence, TrainingRegretIsTheBestARivalCouldBe) {
  stats::RatioInterval a{1.2, 1.1, 1.3, 10}, b{1.02, 0.95, 1.09, 10}, c{1.5, 0, INFINITY, 2};
  EXPECT_NEAR(training_regret({a, b, c}), 1 / 0.95 - 1, 1e-12);  // b might be 5 % faster
  EXPECT_DOUBLE_EQ(training_regret({a}), 0.0);
  EXPECT_LT(training_regret({c}), 0);  // no interval: unknown
}

TEST(PlanConfidence, CollectiveRegretFromTheFittedModels) {
  // ring is measured everywhere; rd only at 64 KiB and 1 MiB, where it beats ring by 2x at the
  // small size and loses at the large one.
  const std::vector<CollectivePoint> pts = {{65536, "ring", 100},
                                            {262144, "ring", 300},
                                            {1048576, "ring", 1000},
                                            {65536, "rd", 50},
                                            {1048576, "rd", 2000}};
  const std::vector<std::pair<uint64_t, double>> sizes = {{65536, 1}, {1048576, 1}};
  EXPECT_DOUBLE_EQ(collective_regret(
                       pts, [](uint64_t b) { return b < 100000 ? "rd" : "ring"; }, sizes),
                   0.0);
  // ring everywhere: 1100 us against the best 1050 us.
  EXPECT_NEAR(collective_regret(
                  pts, [](uint64_t) { return std::string("ring"); }, sizes),
              1100.0 / 1050.0 - 1, 1e-9);
  EXPECT_LT(collective_regret(
                {}, [](uint64_t) { return std::string("ring"); }, sizes),
            0);
}

// The outcome: the reason states each close rival with its interval, and the plan records the
// confidence, the regret and what the budget cut.
TEST(PlanConfidence, TheOutcomeSaysHowSureItIs) {
  std::vector<RecipeCandidate> cands(3);
  for (size_t i = 0; i < cands.size(); ++i) {
    cands[i].label = "c" + std::to_string(i);
    cands[i].training.global_batch = 128;
    cands[i].training.per_rank_batch = 64;
  }
  std::vector<TrialRecord> ts = {trial(0, 0, 12, 0.010, 1), trial(1, 0, 12, 0.011, 2),
                                 trial(2, 0, 0, 0, 3)};
  ts[2].skipped = true;
  ts[2].steps = 0;
  ts[2].samples_per_s = ts[2].step_s = 0;
  ts[2].reason = "not measured: the tune.budget ran out before its first trial";
  RecipeTuneRequest req;
  req.job = {1, 2};
  req.base = recipes::default_plan(1, 2, 64, recipes::Algorithm::kRing);
  const json file = {{"version", 1},
                     {"ranks", 2},
                     {"rounds", 1},
                     {"skipped", 1},
                     {"budget_exhausted", true},
                     {"trials", trials_to_json(ts)}};
  auto o = outcome_from_trials(req, cands, file);
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(o->winner, 0u);
  const std::string& why = o->plan.provenance.reason;
  EXPECT_NE(why.find("it beat c1 by 1.1"), std::string::npos) << why;
  EXPECT_NE(why.find("x (95 % interval 1."), std::string::npos) << why;
  EXPECT_NE(why.find("12 rounds)"), std::string::npos) << why;
  EXPECT_NE(why.find("the budget left 1 candidates unmeasured"), std::string::npos) << why;
  ASSERT_TRUE(o->plan.provenance.confidence.has_value());
  const recipes::Confidence& c = *o->plan.provenance.confidence;
  EXPECT_EQ(c.rival, "c1");
  EXPECT_TRUE(c.significant);
  EXPECT_EQ(c.rounds, 12);
  EXPECT_GE(o->plan.provenance.regret, 0.0);
  EXPECT_EQ(o->plan.provenance.budget_cut, "1 of 3 candidates not measured");
  EXPECT_TRUE(o->alternatives[1].skipped);
  // It survives the plan's JSON.
  auto back = recipes::plan_from_json(recipes::plan_to_json(o->plan));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->provenance, o->plan.provenance);
  EXPECT_NE(format_recipe_outcome(*o).find("not measured (budget)"), std::string::npos);
}

// A rival the winner only matched (the interval holds 1) is not said to be beaten.
TEST(PlanConfidence, TheWhyDoesNotCallANoiseLevelDifferenceAWin) {
  std::vector<RecipeCandidate> cands(3);
  for (size_t i = 0; i < cands.size(); ++i) {
    cands[i].label = "c" + std::to_string(i);
    cands[i].training.global_batch = 128;
  }
  // c0 and c1 alike over 10 paired cycles; c2 20 % slower over 2 cycles only.
  std::vector<TrialRecord> ts = {trial(0, 0, 10, 0.0100, 1), trial(1, 0, 10, 0.0101, 4),
                                 trial(2, 0, 2, 0.012, 2)};
  RecipeTuneRequest req;
  req.job = {1, 2};
  req.base = recipes::default_plan(1, 2, 64, recipes::Algorithm::kRing);
  auto o = outcome_from_trials(req, cands, json{{"rounds", 1}, {"trials", trials_to_json(ts)}});
  ASSERT_TRUE(o.ok()) << o.error().message();
  const std::string& why = o->plan.provenance.reason;
  ASSERT_EQ(o->winner, 0u) << why;
  EXPECT_EQ(why.find("beat c1"), std::string::npos) << why;
  EXPECT_NE(why.find("it was not significantly faster than c1 (1.0"), std::string::npos) << why;
  EXPECT_NE(why.find("95 % interval"), std::string::npos) << why;
  EXPECT_NE(why.find("it was ahead of c2 by 1."), std::string::npos) << why;
  EXPECT_NE(why.find("(2 rounds: too few for an interval)"), std::string::npos) << why;
  ASSERT_TRUE(o->plan.provenance.confidence.has_value());
  EXPECT_FALSE(o->plan.provenance.confidence->significant);
}

// The why never says the winner "beat X by 0.96x": a rival faster where both ran is said to be.
TEST(PlanConfidence, ARivalFasterWhereBothRanIsNotSaidToBeBeaten) {
  std::vector<RecipeCandidate> cands(2);
  for (size_t i = 0; i < cands.size(); ++i) {
    cands[i].label = "c" + std::to_string(i);
    cands[i].training.global_batch = 128;
  }
  // No chunks (an older trial program): each rival is compared in its last round only. c1 ran
  // round 0 faster than c0, yet c0 alone reached round 1 and wins.
  std::vector<TrialRecord> ts(3);
  const double sps[3] = {90, 95, 100};
  const size_t cand[3] = {0, 1, 0};
  const int round[3] = {0, 0, 1};
  for (size_t k = 0; k < 3; ++k) {
    ts[k].candidate = cand[k];
    ts[k].label = cands[cand[k]].label;
    ts[k].round = round[k];
    ts[k].steps = 4;
    ts[k].samples_per_s = sps[k];
    ts[k].step_s = 128 / sps[k];
  }
  RecipeTuneRequest req;
  req.job = {1, 2};
  req.base = recipes::default_plan(1, 2, 64, recipes::Algorithm::kRing);
  auto o = outcome_from_trials(req, cands, json{{"rounds", 2}, {"trials", trials_to_json(ts)}});
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(o->winner, 0u);
  const std::string& why = o->plan.provenance.reason;
  EXPECT_EQ(why.find("beat c1"), std::string::npos) << why;
  EXPECT_NE(why.find("c1 measured 1.06x (one trial each, no interval) faster where both ran"),
            std::string::npos)
      << why;
}

TEST(PlanConfidence, NothingMeasuredFallsBackToTheReferenceSettings) {
  std::vector<RecipeCandidate> cands(2);
  cands[0].label = "reference";
  cands[1].label = "other";
  std::vector<TrialRecord> ts(2);
  for (size_t i = 0; i < 2; ++i) {
    ts[i].candidate = i;
    ts[i].label = cands[i].label;
    ts[i].skipped = true;
  }
  RecipeTuneRequest req;
  req.job = {1, 2};
  req.base = recipes::default_plan(1, 2, 64, recipes::Algorithm::kRing);
  auto o = outcome_from_trials(req, cands, json{{"trials", trials_to_json(ts)}});
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(o->winner, 0u);
  EXPECT_NE(o->plan.provenance.reason.find("not measured: the tune.budget ran out"),
            std::string::npos);
  EXPECT_EQ(o->plan.provenance.budget_cut, "all 2 candidates not measured");
  EXPECT_FALSE(o->plan.provenance.confidence.has_value());
}

}  // namespace
}  // namespace dltune::tuner
