// The 1-rank baseline's identity (launcher/flow/baseline_reuse.h): what changes one rank's speed
// changes it, what does not (who tuned the plan, its words, the learning rate, the run's length)
// leaves it; and a stored baseline is found again, only when it was known within +-5 %.
#include "launcher/flow/baseline_reuse.h"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <stdlib.h>

#include "launcher/tests/test_topology.h"
#include "recipes/plan.h"
#include "recipes/plan_fit.h"
#include "topology/topology.h"

#include "dltune/config.h"

namespace dltune::launcher {
namespace {

class BaselineReuse : public ::testing::Test {
 protected:
  void SetUp() override {
    topo_ = testing::test_topology("mpibind_cts1-pascal.xml");
    ASSERT_FALSE(topo_.cores.empty());
    JobOptions o;
    o.recipe = std::string(DLTUNE_SOURCE_DIR) + "/recipes/quickstart.yaml";
    auto job = make_job(o, topo_);
    ASSERT_TRUE(job.ok()) << job.error().message();
    job_ = *job;
    plan_ = recipes::recipe_default_plan(job_.recipe, job_.shape);
  }
  BaselineIdentity id() const { return baseline_identity(topo_, job_, plan_); }

  topology::Topology topo_;
  Job job_;
  recipes::Plan plan_;
};

TEST_F(BaselineReuse, WhatDoesNotChangeOneRanksSpeedLeavesTheIdentity) {
  const BaselineIdentity base = id();
  EXPECT_EQ(base.plan_hash.size(), 64u);
  EXPECT_EQ(base.key.shape, (tuner::db::JobShape{1, 1}));
  plan_.provenance.source = recipes::PlanSource::kCache;
  plan_.provenance.reason = "another tuning's words";
  plan_.provenance.run_steps = 999;
  plan_.parallel.reason = "2 replicas x 1 stage: ...";
  plan_.parallel.predicted_sps = 123;
  plan_.training.lr_scale = 2.0;
  plan_.training.warmup_steps = 40;
  plan_.collectives.clear();  // one rank sends nothing
  job_.recipe.training.optimizer.lr *= 4;
  job_.recipe.training.steps = 41;
  const BaselineIdentity same = id();
  EXPECT_EQ(same.plan_hash, base.plan_hash);
  EXPECT_TRUE(same.key.same_identity(base.key));
  EXPECT_EQ(same.bind, base.bind);
}

TEST_F(BaselineReuse, WhatChangesOneRanksSpeedChangesTheIdentity) {
  const BaselineIdentity base = id();
  const recipes::Plan original = plan_;
  plan_.training.per_rank_batch *= 2;
  plan_.training.global_batch *= 2;
  EXPECT_NE(id().plan_hash, base.plan_hash) << "batch";
  plan_ = original;
  plan_.job.threads_per_rank = 2;
  EXPECT_NE(id().plan_hash, base.plan_hash) << "threads";
  plan_ = original;
  plan_.training.precision = "bf16";
  EXPECT_NE(id().plan_hash, base.plan_hash) << "precision";
  plan_ = original;
  plan_.training.kernels["conv1"] = "direct3x3";
  EXPECT_NE(id().plan_hash, base.plan_hash) << "kernels";
  plan_ = original;
  job_.recipe.launch.binding = "numa";
  EXPECT_NE(id().bind, base.bind) << "binding";
  job_.recipe.launch.binding = "auto";
  job_.recipe.training.per_rank_batch += 1;  // the recipe's signature
  EXPECT_FALSE(id().key.same_identity(base.key)) << "recipe";
}

TEST_F(BaselineReuse, StoredAndFoundAgainOnlyWhenWellKnown) {
  char dir[] = "/tmp/dltune-baseline-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string db = std::string(dir) + "/sub/db.sqlite";
  const BaselineIdentity base = id();
  auto none = stored_baseline(db, base);  // no database yet: nothing, and none is created
  ASSERT_TRUE(none.ok()) << none.error().message();
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(std::filesystem::exists(db));
  Baseline b;
  b.sps = 3401.5;
  b.steps = 83;
  b.rel_ci = 0.009;
  b.bind = base.bind;
  b.seconds = 1.6;
  ASSERT_TRUE(store_baseline(db, base, b).ok());
  auto got = stored_baseline(db, base);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_DOUBLE_EQ((*got)->sps, 3401.5);
  EXPECT_EQ((*got)->steps, 83);
  EXPECT_GT((*got)->measured_at, 0);
  EXPECT_FALSE((*got)->measured_on.empty());
  // Known only to +-8 %: measured again rather than reused.
  b.rel_ci = 0.08;
  ASSERT_TRUE(store_baseline(db, base, b).ok());
  EXPECT_FALSE(stored_baseline(db, base)->has_value());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dltune::launcher
