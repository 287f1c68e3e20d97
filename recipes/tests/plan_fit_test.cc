// A stored plan never overrides what the recipe fixes (plan_fit.h), one case per fixed key;
// `auto` settings are the plan's; plausibility bounds for plans from outside.
#include "recipes/plan_fit.h"

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

// per_rank_batch x ranks used to overflow in validate_plan.
TEST(PlanPlausible, HugeBatchesDoNotWrapAround) {
  Plan p = quickstart_plan();
  p.training.per_rank_batch = int64_t{1} << 62;
  p.training.global_batch = 0;  // what (2^62 x 2) wraps to
  EXPECT_FALSE(validate_plan(p).ok());
}

}  // namespace
}  // namespace dltune::recipes
