// A stored plan never overrides what the recipe fixes (plan_fit.h), one case per fixed key;
// `auto` settings are the plan's; plausibility bounds for plans from outside.
#include "recipes/plan_fit.h"

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dltune::recipes {
namespace {

Recipe recipe_from(const std::string& extra) {
  const std::string text = "model: lenet\ndata: {kind: synthetic-digits, samples: 20000}\n" + extra;
  ParseOutcome o = parse_recipe(text, "t.yaml", "/tmp");
  EXPECT_TRUE(o.ok()) << (o.problems.empty() ? "" : o.problems[0].to_string());
  return o.recipe;
}

// What the quickstart's cached plan held in the report: per-rank 64, warm-up 20, ring, 4 MiB.
Plan quickstart_plan() {
  Plan p = default_plan(1, 2, 64, Algorithm::kRing);
  p.training.warmup_steps = 20;
  p.training.bucket_bytes = 4u << 20;
  p.training.overlap = true;
  return p;
}

TEST(PlanFit, EachFixedSettingWins) {
  struct Case {
    const char* yaml;
    const char* field;
    std::function<bool(const Plan&)> holds;
  };
  const std::vector<Case> cases = {
      {"training: {batch: {per_rank: 32}}\n", "per_rank_batch",
       [](const Plan& p) {
         return p.training.per_rank_batch == 32 && p.training.global_batch == 64 &&
                p.training.scaling == Scaling::kWeak;
       }},
      {"training: {batch: {global: 256}}\n", "global_batch",
       [](const Plan& p) {
         return p.training.global_batch == 256 && p.training.per_rank_batch == 128 &&
                p.training.scaling == Scaling::kStrong;
       }},
      {"training: {scaling: strong}\n", "scaling",
       [](const Plan& p) { return p.training.scaling == Scaling::kStrong; }},
      {"training: {steps: 100, schedule: {kind: constant, warmup_steps: 30}}\n", "warmup_steps",
       [](const Plan& p) { return p.training.warmup_steps == 30; }},
      {"comm: {bucket: 1MiB}\n", "bucket_bytes",
       [](const Plan& p) { return p.training.bucket_bytes == (1u << 20); }},
      {"comm: {overlap: off}\n", "overlap", [](const Plan& p) { return !p.training.overlap; }},
      {"comm: {allreduce: rd}\n", "allreduce",
       [](const Plan& p) {
         const auto& r = p.collectives.at(Collective::kAllreduce);
         return r.size() == 1 && r[0].algo == Algorithm::kRecursiveDoubling;
       }},
  };
  for (const Case& c : cases) {
    const Recipe recipe = recipe_from(c.yaml);
    Plan plan = quickstart_plan();
    const std::vector<std::string> notes = apply_fixed_settings(recipe, 2, &plan);
    EXPECT_TRUE(c.holds(plan)) << c.field;
    ASSERT_FALSE(notes.empty()) << c.field;
    EXPECT_NE(notes[0].find(c.field), std::string::npos) << notes[0];
    EXPECT_TRUE(validate_plan(plan).ok())
        << c.field << ": " << validate_plan(plan).error().message();
  }
}

// The recipe's warm-up is a floor: a plan's longer warm-up (for a scaled-up lr) stays.
TEST(PlanFit, AutoSettingsAndLongerWarmupsStayThePlans) {
  const Recipe recipe =
      recipe_from("training: {steps: 100, schedule: {kind: constant, warmup_steps: 5}}\n");
  Plan plan = quickstart_plan();
  const Plan before = plan;
  EXPECT_TRUE(apply_fixed_settings(recipe, 2, &plan).empty());
  EXPECT_EQ(plan, before);
}

// A plan laid out as a pipeline counts its batch per replica: a cached 2 replicas x 2 stages
// plan on 4 ranks keeps global = per-rank x 2 under the recipe's fixed per-rank batch (it used
// to be refused: the global batch was set for 4 ranks).
TEST(PlanFit, APipelinesBatchIsPerReplica) {
  Plan plan = default_plan(1, 4, 32, Algorithm::kRing);
  plan.parallel.replicas = 2;
  plan.parallel.stages = 2;
  plan.parallel.partition = {"conv1", "fc1"};
  plan.parallel.microbatches = 8;
  plan.training.global_batch = 64;
  ASSERT_TRUE(validate_plan(plan).ok()) << validate_plan(plan).error().message();
  const Plan before = plan;
  EXPECT_TRUE(
      apply_fixed_settings(recipe_from("training: {batch: {per_rank: 32}}\n"), 4, &plan).empty());
  EXPECT_EQ(plan, before);
  const auto notes =
      apply_fixed_settings(recipe_from("training: {batch: {global: 128}}\n"), 4, &plan);
  EXPECT_EQ(plan.training.global_batch, 128);
  EXPECT_EQ(plan.training.per_rank_batch, 64);  // 128 over 2 replicas, not 4 ranks
  ASSERT_FALSE(notes.empty());
  EXPECT_TRUE(validate_plan(plan).ok()) << validate_plan(plan).error().message();
}

TEST(PlanPlausible, AbsurdButValidPlansAreRefusedNamingTheField) {
  struct Case {
    std::function<void(Plan&)> edit;
    const char* field;
  };
  const std::vector<Case> cases = {
      {[](Plan& p) {
         p.training.per_rank_batch = 1000000000000;
         p.training.global_batch = 2000000000000;
       },
       "training.per_rank_batch"},
      {[](Plan& p) { p.training.warmup_steps = 1000000000000000000; }, "training.warmup_steps"},
      {[](Plan& p) { p.training.lr_scale = 1e9; }, "training.lr_scale"},
      {[](Plan& p) { p.training.bucket_bytes = uint64_t{1} << 40; }, "training.bucket_bytes"},
      {[](Plan& p) { p.provenance.reason = std::string(5000, 'x'); }, "provenance.reason"},
      {[](Plan& p) {
         p.placement = {RankPlacement{0, {1 << 21}, -1, ""}, RankPlacement{1, {1}, -1, ""}};
       },
       "placement[0].cpus"},
      {[](Plan& p) {
         p.placement = {RankPlacement{0, {0}, -1, "mlx5_0\x1b[2J"}, RankPlacement{1, {1}, -1, ""}};
       },
       "placement[0].nic"},
  };
  EXPECT_TRUE(check_plan_plausible(quickstart_plan()).ok());
  for (const Case& c : cases) {
    Plan p = quickstart_plan();
    c.edit(p);
    Status s = check_plan_plausible(p);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_EQ(s.error().message().rfind(c.field, 0), 0u) << s.error().message();
  }
}

// Issue 43, item 6: implausible values a bundle carried through, each refused naming its field.
TEST(PlanPlausible, RoundTwoBoundsAreEnforced) {
  struct Case {
    const char* what;
    std::function<void(Plan&)> edit;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"10 GiB bucket", [](Plan& p) { p.training.bucket_bytes = uint64_t{10} << 30; },
       "training.bucket_bytes"},
      {"1-byte bucket", [](Plan& p) { p.training.bucket_bytes = 1; }, "training.bucket_bytes"},
      {"lr x100 at global batch 128", [](Plan& p) { p.training.lr_scale = 100; },
       "training.lr_scale"},
      {"negative regret", [](Plan& p) { p.provenance.regret = -0.5; }, "provenance.regret"},
      {"negative collective regret", [](Plan& p) { p.provenance.collective_regret = -3; },
       "provenance.collective_regret"},
      {"negative budget", [](Plan& p) { p.provenance.budget_s = -20; },
       "provenance.budget.budget_s"},
      {"budget beyond --budget's bound", [](Plan& p) { p.provenance.budget_s = 1e308; },
       "provenance.budget.budget_s"},
      {"negative tuning time", [](Plan& p) { p.provenance.tuning_s = -1; },
       "provenance.budget.tuning_s"},
      {"confidence interval upside down",
       [](Plan& p) { p.provenance.confidence = Confidence{"b32", 1.2, 1.5, 1.1, 8, true}; },
       "provenance.confidence.lo"},
      {"huge budget cut", [](Plan& p) { p.provenance.budget_cut = std::string(5000, 'c'); },
       "provenance.budget.cut"},
  };
  for (const Case& c : cases) {
    Plan p = quickstart_plan();
    ASSERT_EQ(p.training.global_batch, 128);
    c.edit(p);
    Status s = check_plan_plausible(p);
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.error().message().rfind(c.field, 0), 0u) << c.what << ": " << s.error().message();
    std::printf("  %s: %s\n", c.what, s.error().message().c_str());
  }
  // The bounds' edges are plausible: 1 KiB and 4 GiB buckets, lr x64 at 128 (a reference batch
  // of 2), an unknown regret, a recorded budget at --budget's bound.
  for (const auto& edit : std::vector<std::function<void(Plan&)>>{
           [](Plan& p) { p.training.bucket_bytes = 1024; },
           [](Plan& p) { p.training.bucket_bytes = uint64_t{4} << 30; },
           [](Plan& p) { p.training.lr_scale = 64; }, [](Plan& p) { p.provenance.regret = -1; },
           [](Plan& p) { p.provenance.budget_s = kMaxTuneBudgetSeconds; }}) {
    Plan p = quickstart_plan();
    edit(p);
    EXPECT_TRUE(check_plan_plausible(p).ok()) << check_plan_plausible(p).error().message();
  }
}

// The lr factor a rule gives never passes the plausibility bound's global / 2.
TEST(PlanPlausible, TheLrRuleStaysWithinTheBound) {
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kLinear, 512, 128), 4.0);
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kSqrt, 512, 128), 2.0);
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kNone, 512, 128), 1.0);
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kLinear, 64, 128), 0.5);
  // A reference batch of 1 counts as 2: x64, not x128, at global batch 128.
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kLinear, 128, 1), 64.0);
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kLinear, 1, 1), 1.0);
  for (int64_t g : {1, 2, 3, 7, 128, 1 << 20})
    for (int64_t ref : {1, 2, 3, 128})
      for (LrScaling s : {LrScaling::kAuto, LrScaling::kLinear, LrScaling::kSqrt}) {
        Plan p = default_plan(1, 1, g, Algorithm::kRing);
        p.training.lr_scale = lr_scale_for(s, g, ref);
        EXPECT_TRUE(check_plan_plausible(p).ok()) << g << " " << ref;
      }
}

// Issue 43, item 2: a served plan is checked against the recipe it is applied to: its lr
// scale must be one the recipe's rule gives at the plan's global batch.
TEST(PlanForRecipe, AnLrScaleTheRecipesRuleWouldNotGiveIsRefused) {
  // The quickstart's optimizer: lr meant for a global batch of 128.
  const Recipe linear = recipe_from(
      "training: {batch: {per_rank: 64}, optimizer: {lr: 0.02, lr_reference_batch: 128}}\n");
  Plan p = quickstart_plan();  // 1x2, per-rank 64: global 128
  EXPECT_TRUE(check_plan_lr_scale(linear, 2, p).ok());
  p.training.lr_scale = 1000;
  Status s = check_plan_lr_scale(linear, 2, p);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().exit_code(), 2);
  EXPECT_EQ(s.error().message(),
            "training.lr_scale: x1000 is not what the recipe's lr rule gives at global batch 128 "
            "(optimizer.lr_scaling auto from a reference batch of 128: x1 to x1)");
  // Within the plausibility bound (x64 at 128) but not the recipe's rule.
  p.training.lr_scale = 16;
  EXPECT_TRUE(check_plan_plausible(p).ok());
  EXPECT_FALSE(check_plan_lr_scale(linear, 2, p).ok());

  // At global 512 (per-rank 256 on 2 ranks) auto allows linear x4, sqrt x2 and unscaled x1.
  Plan big = default_plan(1, 2, 256, Algorithm::kRing);
  for (double lr : {4.0, 2.0, 1.0, 3.0}) {
    big.training.lr_scale = lr;
    EXPECT_TRUE(check_plan_lr_scale(linear, 2, big).ok()) << lr;
  }
  for (double lr : {4.01, 0.99, 8.0}) {
    big.training.lr_scale = lr;
    EXPECT_FALSE(check_plan_lr_scale(linear, 2, big).ok()) << lr;
  }
  // A recipe that fixes sqrt: at most x2 at 512; none: x1 only.
  const Recipe sqrt_rule =
      recipe_from("training: {optimizer: {lr: 0.02, lr_reference_batch: 128, lr_scaling: sqrt}}\n");
  big.training.lr_scale = 4.0;
  EXPECT_FALSE(check_plan_lr_scale(sqrt_rule, 2, big).ok());
  big.training.lr_scale = 2.0;
  EXPECT_TRUE(check_plan_lr_scale(sqrt_rule, 2, big).ok());
  const Recipe none =
      recipe_from("training: {optimizer: {lr: 0.02, lr_reference_batch: 128, lr_scaling: none}}\n");
  EXPECT_FALSE(check_plan_lr_scale(none, 2, big).ok());
  big.training.lr_scale = 1.0;
  EXPECT_TRUE(check_plan_lr_scale(none, 2, big).ok());
}

// per_rank_batch x ranks used to overflow in validate_plan.
TEST(PlanPlausible, HugeBatchesDoNotWrapAround) {
  Plan p = quickstart_plan();
  p.training.per_rank_batch = int64_t{1} << 62;
  p.training.global_batch = 0;  // what (2^62 x 2) wraps to
  EXPECT_FALSE(validate_plan(p).ok());
}

}  // namespace
}  // namespace dltune::recipes
