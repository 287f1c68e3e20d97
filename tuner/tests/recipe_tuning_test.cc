// Recipe tuning without ranks: candidate generation (limits, buckets, overlap, the linear lr
// rule), choosing the winner from synthetic trials, and tune_recipe's file round trip with a
// fake RunRanks that plays the trial program on a synthetic throughput model.
#include "tuner/recipe_tuning.h"

#include <cmath>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/paths.h"

namespace dltune::tuner {
namespace {

using json = nlohmann::json;
using recipes::Scaling;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// quickstart.yaml with knobs to turn.
recipes::Recipe recipe(const std::string& batch, const std::string& scaling,
                       const std::string& extra_training = "",
                       const std::string& comm = "  bucket: auto\n  overlap: auto\n",
                       const std::string& lr_scaling = "auto") {
  const std::string yaml =
      "name: t\nmodel: lenet\ndata:\n  kind: synthetic-digits\n  samples: 20000\n"
      "  heldout: 0.1\ntraining:\n  steps: 300\n  batch:\n" +
      batch + "  scaling: " + scaling + "\n" + extra_training +
      "  optimizer:\n    lr: 0.05\n    lr_reference_batch: 128\n    lr_scaling: " + lr_scaling +
      "\n"
      "  schedule:\n    kind: cosine\n    warmup_steps: 20\ncomm:\n" +
      comm + "launch:\n  ranks: 2\n";
  auto out = recipes::parse_recipe(yaml, "t.yaml", "/tmp");
  EXPECT_TRUE(out.ok()) << (out.problems.empty() ? "" : out.problems.front().to_string());
  return out.recipe;
}

TEST(RecipeCandidates, QuickstartWeakCoversBatchesBucketsAndOverlap) {
  const auto r = recipe("    per_rank: auto\n", "weak");
  EXPECT_EQ(gradient_bytes(r), 431080 * 4);
  auto c = generate_candidates(r, {1, 2});
  ASSERT_TRUE(c.ok()) << c.error().message();
  std::set<int64_t> batches;
  std::set<uint64_t> buckets;
  std::set<bool> overlaps;
  for (const auto& k : *c) {
    EXPECT_EQ(k.training.scaling, Scaling::kWeak);
    EXPECT_EQ(k.training.global_batch, k.training.per_rank_batch * 2);
    batches.insert(k.training.per_rank_batch);
    buckets.insert(k.training.bucket_bytes);
    overlaps.insert(k.training.overlap);
    EXPECT_FALSE(k.label.empty());
  }
  EXPECT_EQ(batches, (std::set<int64_t>{32, 64, 128, 256}));
  // 1.6 MiB of gradients: 1 MiB buckets, or one bucket (2 MiB); 4 and 16 MiB would be one too.
  EXPECT_EQ(buckets, (std::set<uint64_t>{1 * kMiB, 2 * kMiB}));
  EXPECT_EQ(overlaps, (std::set<bool>{true, false}));
  EXPECT_EQ(c->size(), 4u * 2u * 2u);
}

// One rank reduces nothing: only the batch is searched, bucket and overlap stay the plan's
// defaults (or the recipe's), so no budget goes to telling identical runs apart.
TEST(RecipeCandidates, OneRankSearchesNoCommunicationSettings) {
  auto c = generate_candidates(recipe("    per_rank: auto\n", "weak"), {1, 1});
  ASSERT_TRUE(c.ok()) << c.error().message();
  std::set<int64_t> batches;
  for (const auto& k : *c) {
    batches.insert(k.training.per_rank_batch);
    EXPECT_EQ(k.training.bucket_bytes, recipes::TrainingPlan{}.bucket_bytes) << k.label;
    EXPECT_EQ(k.training.overlap, recipes::TrainingPlan{}.overlap) << k.label;
  }
  EXPECT_EQ(c->size(), batches.size());
  EXPECT_GT(batches.size(), 1u);
  auto fixed = generate_candidates(
      recipe("    per_rank: 64\n", "weak", "", "  bucket: 16MiB\n  overlap: off\n"), {1, 1});
  ASSERT_TRUE(fixed.ok()) << fixed.error().message();
  ASSERT_EQ(fixed->size(), 1u);
  EXPECT_EQ((*fixed)[0].training.bucket_bytes, 16 * kMiB);
  EXPECT_FALSE((*fixed)[0].training.overlap);
}

TEST(RecipeCandidates, LimitsAndFixedChoicesAreRespected) {
  const auto r = recipe("    per_rank: auto\n    max_global: 128\n", "weak", "",
                        "  bucket: 4MiB\n  overlap: on\n");
  auto c = generate_candidates(r, {1, 2});
  ASSERT_TRUE(c.ok()) << c.error().message();
  ASSERT_EQ(c->size(), 2u);  // per-rank 32 and 64; 128 would make a global batch of 256
  for (const auto& k : *c) {
    EXPECT_LE(k.training.global_batch, 128);
    EXPECT_EQ(k.training.bucket_bytes, 4 * kMiB);
    EXPECT_TRUE(k.training.overlap);
  }

  // No batch fits: the error names the limit.
  auto tight = r;
  tight.training.max_global_batch = 1;
  auto bad = generate_candidates(tight, {1, 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("max_global_batch"), std::string::npos);
}

TEST(RecipeCandidates, ABatchTheRecipeNamesIsKept) {
  // The quickstart names its per-rank batch: only buckets and overlap are searched.
  auto c = generate_candidates(recipe("    per_rank: 64\n", "weak"), {1, 2});
  ASSERT_TRUE(c.ok()) << c.error().message();
  ASSERT_EQ(c->size(), 2u * 2u);
  for (const auto& k : *c) {
    EXPECT_EQ(k.training.per_rank_batch, 64) << k.label;
    EXPECT_EQ(k.training.global_batch, 128) << k.label;
    EXPECT_DOUBLE_EQ(k.training.lr_scale, 1.0) << k.label;  // 128 is the lr reference
  }
  // A global batch under strong scaling: split over the ranks, kept.
  auto g = generate_candidates(recipe("    global: 96\n", "strong"), {1, 2});
  ASSERT_TRUE(g.ok()) << g.error().message();
  for (const auto& k : *g) {
    EXPECT_EQ(k.training.scaling, Scaling::kStrong) << k.label;
    EXPECT_EQ(k.training.per_rank_batch, 48) << k.label;
    EXPECT_EQ(k.training.global_batch, 96) << k.label;
  }
}

TEST(RecipeCandidates, ANearHitNarrowsTheSearchButNeverEmptiesIt) {
  auto c = generate_candidates(recipe("    per_rank: auto\n", "weak"), {1, 2});
  ASSERT_TRUE(c.ok()) << c.error().message();
  recipes::TrainingPlan hint;
  hint.per_rank_batch = 128;
  hint.global_batch = 256;
  hint.scaling = Scaling::kWeak;
  hint.bucket_bytes = 1 * kMiB;
  hint.overlap = false;
  const auto near = narrow_candidates(*c, hint);
  ASSERT_FALSE(near.empty());
  EXPECT_LT(near.size(), c->size());
  for (const auto& k : near) {
    EXPECT_GE(k.training.per_rank_batch, 64) << k.label;
    EXPECT_LE(k.training.per_rank_batch, 256) << k.label;
    EXPECT_FALSE(k.training.overlap) << k.label;
  }
  // A hint nothing is near (another scaling mode) leaves the search whole.
  hint.scaling = Scaling::kStrong;
  EXPECT_EQ(narrow_candidates(*c, hint).size(), c->size());
}

TEST(RecipeCandidates, AutoScalingAddsStrongAtTheReferenceBatch) {
  auto r = recipe("    per_rank: auto\n", "auto");
  r.training.optimizer.lr_reference_batch = 96;  // strong: 96 over 2 ranks = 48 per rank
  auto c = generate_candidates(r, {1, 2});
  ASSERT_TRUE(c.ok()) << c.error().message();
  int strong = 0;
  for (const auto& k : *c) {
    if (k.training.scaling != Scaling::kStrong) continue;
    ++strong;
    EXPECT_EQ(k.training.global_batch, 96);
    EXPECT_EQ(k.training.per_rank_batch, 48);
    EXPECT_DOUBLE_EQ(k.training.lr_scale, 1.0);
  }
  EXPECT_EQ(strong, 4);  // 2 buckets x 2 overlap settings
}

TEST(RecipeCandidates, LinearLrRuleWithWarmupWhereTheBatchGrows) {
  const auto r = recipe("    per_rank: auto\n", "weak");
  auto cands = generate_candidates(r, {1, 2});
  ASSERT_TRUE(cands.ok());
  for (const auto& k : *cands) {
    const double scale = static_cast<double>(k.training.global_batch) / 128.0;
    EXPECT_DOUBLE_EQ(k.training.lr_scale, scale) << k.label;
    if (scale > 1) {
      // max(the recipe's 20, 5 % of 300 steps)
      EXPECT_EQ(k.training.warmup_steps, 20) << k.label;
    } else {
      EXPECT_EQ(k.training.warmup_steps, 20) << k.label;
    }
  }
  // A long run: 5 % of its steps is more than the recipe's warmup.
  auto longer = r;
  longer.training.steps = 4000;
  recipes::TrainingPlan t;
  t.per_rank_batch = 256;
  t.global_batch = 512;
  apply_lr_rule(longer, 2, &t);
  EXPECT_DOUBLE_EQ(t.lr_scale, 4.0);
  EXPECT_EQ(t.warmup_steps, 200);
  t.global_batch = 64;
  apply_lr_rule(longer, 2, &t);
  EXPECT_DOUBLE_EQ(t.lr_scale, 0.5);
  EXPECT_EQ(t.warmup_steps, 20);
}

// The recipe's lr_scaling picks the rule; with auto, fallback_lr_candidates() offers every
// candidate whose lr was scaled up again with another rule, and nothing else.
TEST(RecipeCandidates, LrScalingRuleAndTheSquareRootFallback) {
  const recipes::JobShape job{1, 2};
  auto linear = generate_candidates(recipe("    per_rank: 128\n", "weak"), job);
  ASSERT_TRUE(linear.ok()) << linear.error().message();
  ASSERT_FALSE(linear->empty());
  for (const auto& k : *linear) EXPECT_DOUBLE_EQ(k.training.lr_scale, 2.0) << k.label;
  const auto sqrt_recipe = recipe("    per_rank: 128\n", "weak", "", "  bucket: auto\n", "sqrt");
  auto fixed = generate_candidates(sqrt_recipe, job);
  ASSERT_TRUE(fixed.ok()) << fixed.error().message();
  for (const auto& k : *fixed) {
    EXPECT_DOUBLE_EQ(k.training.lr_scale, std::sqrt(2.0)) << k.label;
    EXPECT_EQ(k.label.find("lr=sqrt"), std::string::npos) << k.label;  // the recipe's own rule
  }
  EXPECT_TRUE(fallback_lr_candidates(*fixed, sqrt_recipe, job, recipes::LrScaling::kSqrt)
                  .empty());  // no fallback to offer

  const auto auto_recipe = recipe("    per_rank: auto\n", "weak");
  auto all = generate_candidates(auto_recipe, job);
  ASSERT_TRUE(all.ok()) << all.error().message();
  const auto back = fallback_lr_candidates(*all, auto_recipe, job, recipes::LrScaling::kSqrt);
  size_t scaled_up = 0;
  for (const auto& k : *all) scaled_up += k.training.lr_scale > 1.0 ? 1 : 0;
  ASSERT_GT(scaled_up, 0u);
  ASSERT_LT(scaled_up, all->size());  // per-rank 32 and 64 give global batches <= 128
  ASSERT_EQ(back.size(), scaled_up);
  for (const auto& k : back) {
    const double ratio = static_cast<double>(k.training.global_batch) / 128.0;
    EXPECT_DOUBLE_EQ(k.training.lr_scale, std::sqrt(ratio)) << k.label;
    EXPECT_NE(k.label.find(" lr=sqrt"), std::string::npos) << k.label;
    EXPECT_GE(k.training.warmup_steps, 20) << k.label;
  }
  const auto none = fallback_lr_candidates(*all, auto_recipe, job, recipes::LrScaling::kNone);
  ASSERT_EQ(none.size(), scaled_up);
  for (const auto& k : none) {
    EXPECT_DOUBLE_EQ(k.training.lr_scale, 1.0) << k.label;
    EXPECT_NE(k.label.find(" lr=none"), std::string::npos) << k.label;
  }
  const auto linear_recipe =
      recipe("    per_rank: auto\n", "weak", "", "  bucket: auto\n", "linear");
  EXPECT_TRUE(fallback_lr_candidates(*all, linear_recipe, job, recipes::LrScaling::kSqrt).empty());
}

TrialRecord rec(size_t c, int round, double sps, bool failed = false) {
  TrialRecord t;
  t.candidate = c;
  t.label = "c" + std::to_string(c);
  t.round = round;
  t.steps = 4 << (2 * round);
  t.samples_per_s = sps;
  t.step_s = sps > 0 ? 128 / sps : 0;
  t.failed = failed;
  t.reason = failed ? "out of memory" : "";
  return t;
}

TEST(RecipeChoice, AFinalistWinsByAllItsTrialsAndFailuresNeverDo) {
  // Round 0: c3 looked fastest but failed later; c1 and c2 went on; c2 won round 1.
  std::vector<TrialRecord> ts = {rec(0, 0, 900),    rec(1, 0, 1000), rec(2, 0, 980),
                                 rec(3, 0, 1500),   rec(1, 1, 1010), rec(2, 1, 1040),
                                 rec(3, 1, 0, true)};
  auto w = choose_winner(ts);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, 2u);
  // Finalists are ranked by samples over time of all their trials, not the last round alone:
  // c1's 4 + 16 steps average 1034 samples/s, c2's 960 although c2 won round 1 by 1 %.
  auto both = choose_winner(
      {rec(0, 0, 500), rec(1, 0, 1200), rec(2, 0, 800), rec(1, 1, 1000), rec(2, 1, 1010)});
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(*both, 1u);
  // A grid: one round, the fastest wins.
  auto g = choose_winner({rec(0, 0, 5), rec(1, 0, 7), rec(2, 0, 6)});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, 1u);
  auto none = choose_winner({rec(0, 0, 0, true), rec(1, 0, 0, true)});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("c1: out of memory"), std::string::npos);
}

// A fake trial program: throughput grows with the batch (saturating), overlap helps, small
// buckets cost a little; every candidate measured with halving-like rounds.
double synthetic_sps(const recipes::TrainingPlan& t) {
  const double b = static_cast<double>(t.global_batch);
  double sps = 4000.0 * b / (b + 100.0);
  if (t.overlap) sps *= 1.10;
  if (t.bucket_bytes < 2 * kMiB) sps *= 0.97;
  if (t.per_rank_batch > 128) sps = 0;  // "out of memory"
  return sps;
}

class TuneRecipe : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dltune-recipe-tune-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  // A request to tune `r` (as "quickstart") on 1 node x 2 ranks in 10 s.
  static RecipeTuneRequest request(const recipes::Recipe& r) {
    RecipeTuneRequest req;
    req.recipe = r;
    req.recipe_path = "quickstart";
    req.job = {1, 2};
    req.base = recipes::default_plan(1, 2, 64, recipes::Algorithm::kRabenseifner);
    req.budget_s = 10;
    return req;
  }
  std::string dir_;
};

TEST_F(TuneRecipe, RunsTheRanksOnceAndBuildsACompletePlan) {
  RecipeTuneRequest req = request(recipe("    per_rank: auto\n", "weak"));
  int calls = 0;
  int trial_steps = 32;  // per trial: with the warm-up past lr x2's 20-step warm-up + 10
  std::vector<std::string> seen;
  auto run = [&](const std::vector<std::string>& args) -> Status {
    ++calls;
    seen = args;
    auto text = paths::read_file(dir_ + "/candidates.json");
    if (!text) return text.error();
    const json c = json::parse(*text);
    auto sched = halving::schedule_from_json(c.at("schedule"));
    if (!sched) return sched.error();
    EXPECT_EQ(c.at("recipe").get<std::string>(), "quickstart");
    std::vector<TrialRecord> ts;
    for (size_t i = 0; i < c.at("candidates").size(); ++i) {
      json p = c.at("base");
      p["training"] = c["candidates"][i]["training"];
      auto plan = recipes::plan_from_json(p);
      if (!plan) return plan.error();
      const double sps = synthetic_sps(plan->training);
      TrialRecord t = rec(i, 0, sps, sps == 0);
      t.label = c["candidates"][i]["label"].get<std::string>();
      t.steps = trial_steps;
      ts.push_back(t);
    }
    json out = {{"version", 1},
                {"ranks", 2},
                {"grid", false},
                {"budget_exhausted", false},
                {"rounds", 1},
                {"tuning_s", 3.},
                {"trial_s", 2.},
                {"setup_s", 0.5},
                {"trials", trials_to_json(ts)}};
    return paths::write_file_atomic(dir_ + "/trials.json", out.dump());
  };
  auto o = tune_recipe(req, run, dir_);
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(calls, 1);
  ASSERT_GE(seen.size(), 9u);
  EXPECT_EQ(seen[0], "trial");
  EXPECT_EQ(seen[2], "quickstart");

  // The best feasible: per-rank 128 (256 is "out of memory"), one bucket, overlap on.
  const auto& t = o->plan.training;
  EXPECT_EQ(t.per_rank_batch, 128);
  EXPECT_EQ(t.bucket_bytes, 2 * kMiB);
  EXPECT_TRUE(t.overlap);
  EXPECT_DOUBLE_EQ(t.lr_scale, 2.0);
  EXPECT_TRUE(recipes::validate_plan(o->plan).ok());
  EXPECT_EQ(o->plan.provenance.source, recipes::PlanSource::kTuned);
  EXPECT_NEAR(o->plan.provenance.measured_sps, synthetic_sps(t), 1e-9);
  EXPECT_EQ(o->plan.collectives, req.base.collectives);
  EXPECT_EQ(o->plan.job, req.job);
  const std::string& why = o->plan.provenance.reason;
  EXPECT_NE(why.find(o->candidates[o->winner].label), std::string::npos) << why;
  EXPECT_NE(why.find("x"), std::string::npos) << why;
  EXPECT_NE(why.find("failed"), std::string::npos) << why;  // the "out of memory" ones
  int failed = 0;
  for (const auto& a : o->alternatives) {
    if (a.failed) {
      ++failed;
      EXPECT_EQ(a.reason, "out of memory");
    } else {
      EXPECT_GE(a.ratio, 1.0) << a.label;
    }
  }
  EXPECT_EQ(failed, 4);

  // JSON round trip and the table.
  auto back = recipe_outcome_from_json(recipe_outcome_to_json(*o));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->plan, o->plan);
  EXPECT_EQ(back->winner, o->winner);
  EXPECT_EQ(back->candidates.size(), o->candidates.size());
  const std::string table = format_recipe_outcome(*o);
  EXPECT_NE(table.find("chosen"), std::string::npos) << table;
  EXPECT_NE(table.find("failed: out of memory"), std::string::npos) << table;

  // A budget that let the winner's trainer run fewer steps than lr x2's warm-up + 10: the
  // scaled lr was never seen at its peak, so the plan keeps the recipe's lr (same step time);
  // a recipe that asks for linear scaling gets it all the same.
  trial_steps = 2;
  auto short_trials = tune_recipe(req, run, dir_);
  ASSERT_TRUE(short_trials.ok()) << short_trials.error().message();
  EXPECT_EQ(short_trials->plan.training.per_rank_batch, 128);
  EXPECT_DOUBLE_EQ(short_trials->plan.training.lr_scale, 1.0);
  EXPECT_EQ(short_trials->plan.training.warmup_steps, 20);
  const std::string& kept = short_trials->plan.provenance.reason;
  EXPECT_NE(kept.find("lr kept unscaled (x1): the budget let its training run"), std::string::npos)
      << kept;
  req.recipe =
      recipe("    per_rank: auto\n", "weak", "", "  bucket: auto\n  overlap: auto\n", "linear");
  auto asked = tune_recipe(req, run, dir_);
  ASSERT_TRUE(asked.ok()) << asked.error().message();
  EXPECT_DOUBLE_EQ(asked->plan.training.lr_scale, 2.0);
}

// A fake trial program that fails every candidate whose lr_scale is above `max_scale` with a
// divergence, and measures the others with synthetic_sps(). Counts its calls; reads and writes
// the files its arguments name.
RunRanks diverging_trials(double max_scale, int* calls, std::vector<std::string>* dirs) {
  return [=](const std::vector<std::string>& args) -> Status {
    ++*calls;
    const std::string cpath = args.at(4), rpath = args.at(6);
    dirs->push_back(cpath.substr(0, cpath.rfind('/')));
    auto text = paths::read_file(cpath);
    if (!text) return text.error();
    const json c = json::parse(*text);
    std::vector<TrialRecord> ts;
    for (size_t i = 0; i < c.at("candidates").size(); ++i) {
      const double scale = c["candidates"][i]["training"].at("lr_scale").get<double>();
      json p = c.at("base");
      p["training"] = c["candidates"][i]["training"];
      auto plan = recipes::plan_from_json(p);
      if (!plan) return plan.error();
      const bool diverges = scale > max_scale;
      TrialRecord t = rec(i, 0, diverges ? 0 : synthetic_sps(plan->training), diverges);
      t.label = c["candidates"][i]["label"].get<std::string>();
      t.steps = 40;
      if (diverges) t.reason = "diverged: the loss rose from 2.3 to 5.3 after 21 steps";
      ts.push_back(t);
    }
    json out = {{"version", 1}, {"ranks", 2}, {"rounds", 1}, {"trials", trials_to_json(ts)}};
    return paths::write_file_atomic(rpath, out.dump());
  };
}

// lr_scaling auto: when linear scaling diverges for every candidate, the tuner runs the
// candidates again with square-root scaling, in a directory of their own, and says so; when
// that diverges too, with unscaled lr; a recipe that fixes linear scaling gets the divergence
// as its error; when every rule diverges, the error gives each search's reasons.
TEST_F(TuneRecipe, EveryCandidateDivergingWithLinearLrTriesSquareRootScaling) {
  RecipeTuneRequest req = request(recipe("    per_rank: 128\n", "weak"));  // linear lr x2
  int calls = 0;
  std::vector<std::string> dirs;
  auto o = tune_recipe(req, diverging_trials(1.5, &calls, &dirs), dir_);
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(calls, 2);
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], dir_);
  EXPECT_EQ(dirs[1], dir_ + "/sqrt-lr");
  EXPECT_DOUBLE_EQ(o->plan.training.lr_scale, std::sqrt(2.0));
  EXPECT_NE(o->candidates[o->winner].label.find("lr=sqrt"), std::string::npos);
  const std::string& why = o->plan.provenance.reason;
  EXPECT_NE(
      why.find("every candidate diverged with linear lr scaling, so square-root lr was tried"),
      std::string::npos)
      << why;
  EXPECT_TRUE(recipes::validate_plan(o->plan).ok());

  calls = 0;
  dirs.clear();
  req.recipe =
      recipe("    per_rank: 128\n", "weak", "", "  bucket: auto\n  overlap: auto\n", "linear");
  auto linear = tune_recipe(req, diverging_trials(1.5, &calls, &dirs), dir_);
  ASSERT_FALSE(linear.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_NE(linear.error().message().find("diverged: the loss rose"), std::string::npos)
      << linear.error().message();

  calls = 0;
  dirs.clear();
  req.recipe = recipe("    per_rank: 128\n", "weak");
  auto unscaled = tune_recipe(req, diverging_trials(1.0, &calls, &dirs), dir_);
  ASSERT_TRUE(unscaled.ok()) << unscaled.error().message();
  EXPECT_EQ(calls, 3);
  ASSERT_EQ(dirs.size(), 3u);
  EXPECT_EQ(dirs[2], dir_ + "/none-lr");
  EXPECT_DOUBLE_EQ(unscaled->plan.training.lr_scale, 1.0);
  const std::string& why2 = unscaled->plan.provenance.reason;
  EXPECT_NE(why2.find("with linear and square-root lr scaling, so unscaled lr was tried"),
            std::string::npos)
      << why2;

  calls = 0;
  auto all = tune_recipe(req, diverging_trials(0.5, &calls, &dirs), dir_);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(calls, 3);
  const std::string& m = all.error().message();
  for (const char* rule : {"linear", "square-root", "unscaled"}) {
    EXPECT_NE(m.find(std::string("with ") + rule + " lr, every candidate configuration failed"),
              std::string::npos)
        << rule << ": " << m;
  }
}

TEST_F(TuneRecipe, RankFailureAndBadBudgetAreErrors) {
  RecipeTuneRequest req;
  req.recipe = recipe("    per_rank: auto\n", "weak");
  req.recipe_path = "quickstart";
  req.job = {1, 2};
  req.budget_s = 0;
  auto run = [](const std::vector<std::string>&) -> Status { return peer_failed("rank 1 died"); };
  EXPECT_FALSE(tune_recipe(req, run, dir_).ok());
  req.budget_s = 5;
  auto o = tune_recipe(req, run, dir_);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message().find("rank 1 died"), std::string::npos);
}

// The database rows of an outcome: one per trial with its candidate's configuration, the
// distribution when the trial program reported it, reasons made storable; and the plan's
// prediction weighs the winner's trials by their time (not a plain mean of the rounds).
TEST(RecipeTrialRows, EveryTrialWithItsConfigurationAndAStorableReason) {
  std::vector<RecipeCandidate> cands(3);
  for (size_t i = 0; i < cands.size(); ++i) {
    auto& t = cands[i].training;
    t.per_rank_batch = 32 << i;
    t.global_batch = 64 << i;
    t.scaling = i == 2 ? Scaling::kStrong : Scaling::kWeak;
    t.bucket_bytes = (i + 1) * kMiB;
    t.overlap = i != 1;
    t.lr_scale = 0.5 * static_cast<double>(i + 1);
    cands[i].label = "cand" + std::to_string(i);
  }
  std::vector<TrialRecord> ts = {rec(0, 0, 1000), rec(1, 0, 700), rec(2, 0, 0, true),
                                 rec(0, 1, 1200)};
  ts[2].reason = "bad_alloc; said \"no\"\n";
  ts[3].median_sps = 1210;
  ts[3].iqr_sps = 35;
  RecipeTuneRequest req;
  req.job = {1, 2};
  req.base = recipes::default_plan(1, 2, 32, recipes::Algorithm::kRing);
  const json file = {{"version", 1}, {"ranks", 2}, {"rounds", 2}, {"trials", trials_to_json(ts)}};
  auto o = outcome_from_trials(req, cands, file);
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(o->winner, 0u);
  // 4 steps at 1000 and 16 at 1200 samples/s: 20 x 128 samples in 0.512 + 1.707 s.
  EXPECT_NEAR(o->plan.provenance.predicted_sps, 20 * 128 / (4 * 0.128 + 16 * 128 / 1200.0), 1e-6);
  EXPECT_DOUBLE_EQ(o->plan.provenance.measured_sps, 1200);
  EXPECT_EQ(o->plan.provenance.reason.find("budget"), std::string::npos);
  // A search the budget stopped says so, with the evidence the winner had.
  json cut = file;
  cut["budget_exhausted"] = true;
  auto stopped = outcome_from_trials(req, cands, cut);
  ASSERT_TRUE(stopped.ok()) << stopped.error().message();
  EXPECT_NE(stopped->plan.provenance.reason.find(
                "cut short by the budget in round 2 after 20 steps of the winner"),
            std::string::npos)
      << stopped->plan.provenance.reason;

  db::Key key;
  key.fingerprint = "ab12";
  key.recipe = "cafe";
  key.shape = {1, 2};
  const db::Provenance prov{"", "h", "u", "0.1.0", 1700000000, ""};
  const auto rows = recipe_trial_rows(*o, key, prov);
  ASSERT_EQ(rows.size(), 4u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const db::RecipeTrial& r = rows[i];
    EXPECT_TRUE(db::validate_trial(r).ok()) << i << ": " << db::validate_trial(r).error().message();
    const auto& c = cands[ts[i].candidate].training;
    EXPECT_EQ(r.candidate, static_cast<int64_t>(ts[i].candidate));
    EXPECT_EQ(r.round, ts[i].round);
    EXPECT_EQ(r.label, cands[ts[i].candidate].label);
    EXPECT_EQ(r.per_rank_batch, c.per_rank_batch);
    EXPECT_EQ(r.global_batch, c.global_batch);
    EXPECT_EQ(r.scaling, ts[i].candidate == 2 ? "strong" : "weak");
    EXPECT_EQ(r.bucket_bytes, c.bucket_bytes);
    EXPECT_EQ(r.overlap, c.overlap);
    EXPECT_DOUBLE_EQ(r.lr_scale, c.lr_scale);
    EXPECT_EQ(r.steps, ts[i].steps);
    EXPECT_DOUBLE_EQ(r.samples_per_s, ts[i].samples_per_s);
    EXPECT_EQ(r.provenance, prov);
    EXPECT_TRUE(r.key.same_identity(key));
  }
  EXPECT_TRUE(rows[2].failed);
  EXPECT_EQ(rows[2].reason, "bad_alloc, said *no* ");
  EXPECT_FALSE(rows[0].median_sps.has_value());
  ASSERT_TRUE(rows[3].median_sps.has_value());
  EXPECT_DOUBLE_EQ(*rows[3].median_sps, 1210);
  EXPECT_DOUBLE_EQ(*rows[3].iqr_sps, 35);
  // A trial the database would refuse is left out rather than failing the plan's storing.
  o->trials["trials"].push_back(trials_to_json({rec(1, 1, 1e300)})[0]);
  EXPECT_EQ(recipe_trial_rows(*o, key, prov).size(), 4u);
  // A candidate the budget left unmeasured is not a trial: nothing to store, nothing to warn.
  TrialRecord skipped = rec(2, 1, 0);
  skipped.skipped = true;
  skipped.steps = 0;
  skipped.reason = "not measured: the tune.budget ran out before its first trial";
  o->trials["trials"].push_back(trials_to_json({skipped})[0]);
  EXPECT_EQ(recipe_trial_rows(*o, key, prov).size(), 4u);
  ::testing::internal::CaptureStderr();
  (void)recipe_trial_rows(*o, key, prov);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("not measured"), std::string::npos) << err;
}

TEST(RecipeSchedule, HalvingReachesOneSurvivorAndKeepsSmallModelsResident) {
  RecipeTuneRequest req;
  req.budget_s = 20;
  const TrialSchedule s = schedule_for(req, 16, 16, 431080 * 4);
  EXPECT_EQ(s.halving.min_steps, 4);
  EXPECT_EQ(s.halving.max_steps, 64);  // 16 -> 4 -> 2: trials of 4, 16, 64 steps
  EXPECT_TRUE(s.halving.keep_built);
  EXPECT_FALSE(schedule_for(req, 24, 24, 61000000LL * 4).halving.keep_built);
  // AlexNet's 8 bucket / overlap candidates of one batch share one trainer in halving: 1 GB.
  EXPECT_TRUE(schedule_for(req, 8, 1, 61000000LL * 4).halving.keep_built);
  EXPECT_FALSE(schedule_for(req, 8, 8, 61000000LL * 4).halving.keep_built);
  auto back = halving::schedule_from_json(halving::schedule_to_json(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->halving.max_steps, 64);
  EXPECT_EQ(back->halving.keep_built, s.halving.keep_built);
  EXPECT_EQ(back->chunk_steps, s.chunk_steps);
  // The trial program refuses a schedule with a key missing or mistyped (one reader).
  nlohmann::json broken = halving::schedule_to_json(s);
  broken.erase("eta");
  EXPECT_FALSE(halving::schedule_from_json(broken).ok());
  broken = halving::schedule_to_json(s);
  broken["chunk_steps"] = "two";
  EXPECT_FALSE(halving::schedule_from_json(broken).ok());
  // A lone candidate (say, the only layout that fits) is compared with nothing: its trial
  // measures its throughput for as long as a step time takes to settle; a request's own
  // min_steps still rules.
  const TrialSchedule one = schedule_for(req, 1, 1, 431080 * 4);
  EXPECT_EQ(one.halving.min_steps, kSettledTrialSteps);
  EXPECT_EQ(one.halving.max_steps, kSettledTrialSteps);
  req.min_steps = 2;
  EXPECT_EQ(schedule_for(req, 1, 1, 431080 * 4).halving.min_steps, 2);
}

// Halving builds one trainer per family (the same batch, scaling, learning rate and warmup);
// the grid one per candidate.
TEST(RecipeSchedule, HalvingBuildsOneTrainerPerFamily) {
  std::vector<RecipeCandidate> cands;
  for (int64_t batch : {32, 64}) {
    for (uint64_t bucket : {uint64_t{1} << 20, uint64_t{4} << 20}) {
      for (bool overlap : {false, true}) {
        RecipeCandidate k;
        k.training.per_rank_batch = batch;
        k.training.global_batch = 2 * batch;
        k.training.bucket_bytes = bucket;
        k.training.overlap = overlap;
        cands.push_back(k);
      }
    }
  }
  EXPECT_EQ(trial_trainers(cands, false), 2u);
  EXPECT_EQ(trial_trainers(cands, true), 8u);
  cands.back().training.lr_scale = 2;  // another learning rate trains differently
  EXPECT_EQ(trial_trainers(cands, false), 3u);
}

}  // namespace
}  // namespace dltune::tuner
