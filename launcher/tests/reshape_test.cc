// A run continued on another shape (launcher/flow/reshape.h): which shapes it refuses, what the
// new plan keeps of the old one and what it takes from the new shape's, and how the summary says
// it. (launch_test.sh section 8 resumes a real run on fewer ranks.)
#include "launcher/flow/reshape.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace dltune::launcher {
namespace {

// A plan of `nodes` x `rpn` data-parallel ranks at `per_rank` samples each.
recipes::Plan plan_of(int nodes, int rpn, int64_t per_rank) {
  recipes::Plan p = recipes::default_plan(nodes, rpn, per_rank, recipes::Algorithm::kRing);
  p.parallel.replicas = nodes * rpn;
  return p;
}

TEST(Reshape, OnlyAnotherNodeCountOrRanksPerNodeIsAReshape) {
  const recipes::Plan p = plan_of(1, 2, 32);
  EXPECT_FALSE(needs_reshape(p, {1, 2, 1}));
  EXPECT_FALSE(needs_reshape(p, {1, 2, 4}));  // threads alone: the same layout
  EXPECT_TRUE(needs_reshape(p, {1, 1, 2}));
  EXPECT_TRUE(needs_reshape(p, {2, 1, 1}));  // the same 2 ranks on 2 nodes
}

TEST(Reshape, AGlobalBatchThatDoesNotSplitIsRefusedNamingTheShapesThatWork) {
  const recipes::Plan p = plan_of(1, 2, 32);  // global batch 64
  EXPECT_TRUE(check_reshape(p, 1).ok());
  EXPECT_TRUE(check_reshape(p, 4).ok());
  EXPECT_TRUE(check_reshape(p, 64).ok());
  Status three = check_reshape(p, 3);
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(three.error().message(),
            "the run trained at global batch 64, which does not split evenly over 3 ranks; it "
            "continues with that batch so that the data order and the learning-rate schedule go "
            "on unchanged: resume on 1, 2, 4, 8, 16, 32 ranks");
  // More ranks than samples: some would train on nothing.
  Status many = check_reshape(p, 128);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.error().message().find("resume on 2, 4, 8, 16, 32, 64 ranks"), std::string::npos)
      << many.error().message();
}

TEST(Reshape, FewerRanksAreTheMostTheGlobalBatchSplitsOverDownToTheMinimum) {
  const recipes::Plan p = plan_of(1, 8, 6);  // global batch 48
  EXPECT_EQ(fewer_ranks(p, 8, 1), 6);
  EXPECT_EQ(fewer_ranks(p, 8, 7), 0);  // 7 does not split 48
  EXPECT_EQ(fewer_ranks(p, 6, 1), 4);
  EXPECT_EQ(fewer_ranks(p, 2, 0), 1);  // at least one rank
  EXPECT_EQ(fewer_ranks(p, 1, 1), 0);
}

TEST(Reshape, TheTrainingIsKeptAndTheShapesSettingsAreTheNewPlans) {
  recipes::Plan old = plan_of(2, 2, 16);  // 4 ranks, global 64
  old.training.lr_scale = 2.0;
  old.training.warmup_steps = 12;
  old.training.precision = "bf16";
  old.job.threads_per_rank = 4;
  old.parallel.replicas = 2;  // a pipeline of 2 stages x 2 replicas, 32 per replica
  old.parallel.stages = 2;
  old.parallel.partition = {"conv1", "fc"};
  old.training.per_rank_batch = 32;
  recipes::Plan fresh = plan_of(1, 2, 32);  // the new shape's (weak, its own lr and buckets)
  fresh.job.threads_per_rank = 1;
  fresh.training.bucket_bytes = 1 << 20;
  fresh.provenance.source = recipes::PlanSource::kCache;
  Reshape r;
  carry_training(old, &fresh, &r);
  const recipes::TrainingPlan& t = fresh.training;
  EXPECT_EQ(t.scaling, recipes::Scaling::kStrong);
  EXPECT_EQ(t.global_batch, 64);
  EXPECT_EQ(t.per_rank_batch, 32);
  EXPECT_EQ(t.lr_scale, 2.0);
  EXPECT_EQ(t.warmup_steps, 12);
  EXPECT_EQ(t.precision, "bf16");
  EXPECT_EQ(t.bucket_bytes, 1u << 20);  // the new shape's
  EXPECT_EQ(fresh.job.threads_per_rank, 1);
  EXPECT_EQ(fresh.parallel.stages, 1);  // for the layout search to choose again
  EXPECT_EQ(fresh.parallel.replicas, 2);
  EXPECT_TRUE(fresh.parallel.partition.empty());
  EXPECT_TRUE(recipes::validate_plan(fresh).ok())
      << recipes::validate_plan(fresh).error().message();
  EXPECT_EQ(r.from_nodes, 2);
  EXPECT_EQ(r.from_ranks, 4);
  EXPECT_EQ(r.to_nodes, 1);
  EXPECT_EQ(r.to_ranks, 2);
  EXPECT_EQ(r.plan_source, "cache");
  const nlohmann::json j = reshape_json(r);
  EXPECT_EQ(j["from"], (nlohmann::json{{"nodes", 2}, {"ranks", 4}}));
  EXPECT_EQ(j["global_batch"], 64);
  EXPECT_EQ(reshape_text(j),
            "from 4 ranks on 2 nodes to 2 ranks on 1 node; global batch 64 kept; the new "
            "shape's settings: the database's plan for it; changed: the layout (2 stages x 2 "
            "replicas) chosen again, threads per rank 4 -> 1, the gradient buckets");
}

TEST(Reshape, TheSummaryLineSurvivesAnEditedSummary) {
  EXPECT_EQ(
      reshape_text(nlohmann::json{
          {"from", 3}, {"global_batch", "64"}, {"to", {{"ranks", -2.5}}}, {"changes", {1, "x"}}}),
      "from 0 ranks on 0 nodes to 0 ranks on 0 nodes; global batch 0 kept; the new "
      "shape's settings: the recipe's own (none cached for it); changed: x");
}

}  // namespace
}  // namespace dltune::launcher
