// Schema v5: per-level cost models (store, replace, read back by filter, refuse malformed rows,
// prune with their measurements) and the recipe trials' step split (stored and read back;
// absent where a trial program did not report it).
#include <gtest/gtest.h>

#include "tuner/db/store.h"
#include "tuner/db/tests/db_fixture.h"

namespace dltune::tuner::db {
namespace {

using testing::sample_key;
using testing::sample_plan;
using testing::TempDir;

CostModel model(const std::string& level, int64_t nodes, double beta) {
  CostModel m;
  m.key = sample_key("ab12", nodes, 2);
  m.level = level;
  m.alpha_s = 2e-6;
  m.beta_s_per_b = beta;
  m.gamma_s_per_b = 1e-10;
  m.rel_rms = 0.08;
  m.points = 40;
  m.provenance = testing::sample_provenance();
  return m;
}

TEST(CostModels, StoredReplacedAndReadBackByShape) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("db.sqlite"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.error().message();
  std::vector<CostModel> rows = {model("intra", 1, 1e-10), model("inter", 2, 8e-10)};
  ASSERT_TRUE(db->put_cost_models(rows).ok());
  rows[1].beta_s_per_b = 9e-10;  // a refit replaces the row of the same key and level
  ASSERT_TRUE(db->put_cost_models({&rows[1], 1}).ok());
  auto all = db->cost_models();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  Filter f;
  f.shape = JobShape{2, 2};
  auto inter = db->cost_models(f);
  ASSERT_TRUE(inter.ok());
  ASSERT_EQ(inter->size(), 1u);
  EXPECT_EQ((*inter)[0].level, "inter");
  EXPECT_DOUBLE_EQ((*inter)[0].beta_s_per_b, 9e-10);
  EXPECT_DOUBLE_EQ((*inter)[0].rel_rms, 0.08);
  EXPECT_EQ((*inter)[0].points, 40);
  EXPECT_EQ((*inter)[0].key.shape, (JobShape{2, 2}));
}

TEST(CostModels, MalformedRowsAreRefusedAndNothingIsWritten) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("db.sqlite"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  std::vector<CostModel> rows = {model("intra", 1, 1e-10), model("memory", 1, 1e-10)};
  auto s = db->put_cost_models(rows);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("cost_model.level"), std::string::npos);
  rows[1] = model("inter", 2, -1);
  EXPECT_FALSE(db->put_cost_models(rows).ok());
  EXPECT_TRUE(db->cost_models()->empty());
}

TEST(CostModels, PruneTakesThemWithTheMeasurements) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("db.sqlite"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db->put_cost_models(std::vector<CostModel>{model("intra", 1, 1e-10)}).ok());
  PruneSpec p;
  p.fingerprint = "ab12";
  auto n = db->prune(p);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_TRUE(db->cost_models()->empty());
}

TEST(TrialSplit, StoredWithTheTrialAndReadBack) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("db.sqlite"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  const PlanRecord plan = sample_plan();
  RecipeTrial with, without;
  for (RecipeTrial* t : {&with, &without}) {
    t->key = plan.key;
    t->label = "b32 weak bucket=4MiB overlap";
    t->per_rank_batch = 32;
    t->global_batch = 64;
    t->scaling = "weak";
    t->bucket_bytes = 4 << 20;
    t->steps = 8;
    t->samples_per_s = 640;
    t->step_s = 0.1;
    t->provenance = plan.provenance;
  }
  without.candidate = 1;
  with.compute_s = 0.08;
  with.exposed_comm_s = 0.015;
  with.allreduce_s = {0.004, 0.006, 0.0125};
  with.memory_estimate_bytes = int64_t{104016428};
  with.memory_peak_bytes = int64_t{97123456};
  ASSERT_TRUE(db->put_results(&plan, {}, std::vector<RecipeTrial>{with, without}).ok());
  auto back = db->recipe_trials();
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].compute_s, 0.08);
  EXPECT_EQ((*back)[0].exposed_comm_s, 0.015);
  EXPECT_EQ((*back)[0].allreduce_s, (std::vector<double>{0.004, 0.006, 0.0125}));
  EXPECT_EQ((*back)[0].memory_estimate_bytes, int64_t{104016428});
  EXPECT_EQ((*back)[0].memory_peak_bytes, int64_t{97123456});
  EXPECT_FALSE((*back)[1].compute_s.has_value());
  EXPECT_TRUE((*back)[1].allreduce_s.empty());
  EXPECT_FALSE((*back)[1].memory_estimate_bytes.has_value());
  EXPECT_FALSE((*back)[1].memory_peak_bytes.has_value());
}

}  // namespace
}  // namespace dltune::tuner::db
