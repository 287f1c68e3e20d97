// The ranks x threads search (launcher/flow/shape_search.h): which shapes a node offers, which
// one the measurements choose and why, the plan each is measured with, and the measurements
// found again in the database (a later launch measures nothing) under an identity of their own.
#include "launcher/flow/shape_search.h"

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <stdlib.h>

#include "launcher/flow/baseline_reuse.h"
#include "launcher/tests/test_topology.h"
#include "topology/topology.h"

#include "dltune/config.h"

namespace dltune::launcher {
namespace {

std::vector<int> ranks_of(const std::vector<RanksThreads>& shapes) {
  std::vector<int> r;
  for (const RanksThreads& s : shapes) {
    EXPECT_GT(s.threads, 0);
    r.push_back(s.ranks_per_node);
  }
  return r;
}

TEST(ShapeCandidates, SpreadFromOneRankPerDomainToOnePerCore) {
  // 36 cores in 2 domains: 2, 4, 6, 12, 18, 36 ranks divide them; four spread geometrically.
  const auto quartz = shape_candidates(36, 2);
  EXPECT_EQ(ranks_of(quartz), (std::vector<int>{2, 6, 12, 36}));
  for (const RanksThreads& s : quartz) EXPECT_EQ(s.ranks_per_node * s.threads, 36);
  // Every one when they are few; fewest ranks first.
  EXPECT_EQ(ranks_of(shape_candidates(2, 1)), (std::vector<int>{1, 2}));
  EXPECT_EQ(ranks_of(shape_candidates(8, 2)), (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(shape_candidates(8, 2)[0].threads, 4);
  // No multiple of 4 domains divides 6 cores: the divisors of 6.
  EXPECT_EQ(ranks_of(shape_candidates(6, 4)), (std::vector<int>{1, 2, 3, 6}));
  // Nothing to choose on one core.
  EXPECT_EQ(shape_candidates(1, 1).size(), 1u);
  EXPECT_EQ(ranks_of(shape_candidates(36, 2, 2)), (std::vector<int>{2, 36}));
}

ShapeMeasurement measured(int r, int t, double sps, const std::string& source = "measured") {
  ShapeMeasurement m;
  m.shape = {r, t};
  m.sps = sps;
  m.rel_ci = 0.01;
  m.source = source;
  return m;
}

TEST(DecideShape, TheFastestOrFewerRanksWithinTwoPercent) {
  const RanksThreads rule{1, 2};
  ShapeChoice c = decide_shape({measured(1, 2, 5000), measured(2, 1, 6000)}, rule);
  EXPECT_TRUE(c.decided);
  EXPECT_EQ(c.chosen, (RanksThreads{2, 1}));
  EXPECT_NE(c.why.find("2 ranks x 1 thread, the fastest, measured on this node: "),
            std::string::npos)
      << c.why;
  EXPECT_NE(c.why.find("1 rank x 2 threads 5,000 samples/s +-1.0 % (0.83x)"), std::string::npos)
      << c.why;
  // 1.5 % slower with half the ranks: the fewer ranks win, and the reason says so.
  c = decide_shape({measured(1, 2, 5910), measured(2, 1, 6000)}, rule);
  EXPECT_EQ(c.chosen, (RanksThreads{1, 2}));
  EXPECT_NE(c.why.find("within 2.0 % with fewer ranks"), std::string::npos) << c.why;
  // 3 % slower: not a tie.
  c = decide_shape({measured(1, 2, 5820), measured(2, 1, 6000)}, rule);
  EXPECT_EQ(c.chosen, (RanksThreads{2, 1}));
  // A candidate that could not run is named with its reason, never chosen.
  ShapeMeasurement failed;
  failed.shape = {2, 1};
  failed.error = "the ranks ran out of memory";
  c = decide_shape({measured(1, 2, 100, "database"), failed}, rule);
  EXPECT_EQ(c.chosen, (RanksThreads{1, 2}));
  EXPECT_NE(c.why.find("2 ranks x 1 thread not measured (the ranks ran out of memory)"),
            std::string::npos)
      << c.why;
  EXPECT_NE(c.why.find("by an earlier launch (--retune measures again)"), std::string::npos)
      << c.why;
  // Nothing measured: the rule stands, undecided.
  c = decide_shape({failed}, rule);
  EXPECT_FALSE(c.decided);
  EXPECT_EQ(c.chosen, rule);
  const nlohmann::json j = shape_choice_json(decide_shape({measured(1, 2, 5000), failed}, rule));
  EXPECT_EQ(j["ranks_per_node"], 1);
  EXPECT_EQ(j["candidates"][1]["samples_per_s"], nullptr);
  EXPECT_EQ(j["candidates"][1]["error"], "the ranks ran out of memory");
}

class ShapeSearchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    topo_ = testing::test_topology("mpibind_cts1-quartz-smt1.xml");
    ASSERT_FALSE(topo_.cores.empty());
  }
  Job job(const std::vector<std::string>& sets) {
    JobOptions o;
    // tiny.yaml (synthetic digits) with its ranks left auto.
    o.recipe = std::string(DLTUNE_SOURCE_DIR) + "/tests/launch/data/tiny.yaml";
    std::vector<std::string> all = {"launch.ranks=auto", "launch.ranks_per_node=auto"};
    all.insert(all.end(), sets.begin(), sets.end());
    for (const std::string& s : all) {
      auto ov = recipes::parse_override(s);
      EXPECT_TRUE(ov.ok()) << s;
      if (ov) o.overrides.push_back(*ov);
    }
    auto j = make_job(o, topo_);
    EXPECT_TRUE(j.ok()) << j.error().message();
    return j.ok() ? *j : Job{};
  }
  topology::Topology topo_;
};

TEST_F(ShapeSearchTest, OnlyAJobThatLeavesRanksAndThreadsAutoSearches) {
  const Job rule = job({"training.batch.global=256", "training.batch.per_rank=auto"});
  EXPECT_TRUE(rule.shape_auto);
  EXPECT_EQ(rule.ranks, 2);  // one per NUMA domain, 18 threads each
  EXPECT_EQ(rule.shape.threads_per_rank, 18);
  EXPECT_FALSE(job({"launch.ranks=4"}).shape_auto);
  EXPECT_FALSE(job({"launch.threads_per_rank=3"}).shape_auto);
}

TEST_F(ShapeSearchTest, EveryCandidateTrainsTheRuleShapesGlobalBatch) {
  const Job rule =
      job({"training.batch.global=256", "training.batch.per_rank=auto", "training.scaling=strong"});
  const int64_t g = shape_search_batch(rule);
  EXPECT_EQ(g, 256);
  const Job twelve = job_with_shape(rule, {12, 3});
  EXPECT_EQ(twelve.ranks, 12);
  EXPECT_EQ(twelve.recipe.launch.ranks, 12);
  EXPECT_EQ(twelve.recipe.launch.threads_per_rank, 0);  // still auto: the key's signature
  const recipes::Plan p = shape_plan(twelve, g);
  EXPECT_EQ(p.training.global_batch, 256);
  EXPECT_EQ(p.training.scaling, recipes::Scaling::kStrong);
  EXPECT_EQ(p.job.ranks_per_node, 12);
  EXPECT_EQ(p.job.threads_per_rank, 3);
  // A recipe that fixes the per-rank batch keeps it on every shape.
  const Job fixed = job({"training.batch.per_rank=32"});
  EXPECT_EQ(shape_search_batch(fixed), 0);
  const recipes::Plan q = shape_plan(job_with_shape(fixed, {6, 6}), 0);
  EXPECT_EQ(q.training.per_rank_batch, 32);
  EXPECT_EQ(q.training.global_batch, 32 * 6);
}

TEST_F(ShapeSearchTest, AShapeTheRecipesBatchDoesNotSplitOverIsLeftOutSayingWhy) {
  // 256 samples split over 2 ranks, not over 6, 12 or 36.
  const Job rule = job({"training.batch.global=256", "training.batch.per_rank=auto"});
  ShapeSearch s;
  s.job = &rule;
  s.topo = &topo_;
  s.measure = false;
  const ShapeChoice c = search_shape(s);
  ASSERT_EQ(c.shapes.size(), 4u);
  EXPECT_EQ(c.shapes[0].error, "not measured yet");
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_NE(c.shapes[i].error.find("training.batch"), std::string::npos) << c.shapes[i].error;
    EXPECT_NE(c.shapes[i].error.find(std::to_string(c.shapes[i].shape.ranks_per_node)),
              std::string::npos)
        << c.shapes[i].error;
  }
}

TEST_F(ShapeSearchTest, MeasurementsAreFoundAgainAndNothingIsMeasured) {
  char dir[] = "/tmp/dltune-shapes-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string db = std::string(dir) + "/db.sqlite";
  const Job rule = job({"training.batch.global=288", "training.batch.per_rank=auto"});
  const int64_t g = shape_search_batch(rule);
  ShapeSearch s;
  s.job = &rule;
  s.topo = &topo_;
  s.worker = "/nonexistent/dltune-worker";  // nothing is run
  s.db_path = db;
  s.work_dir = dir;
  s.measure = false;
  // An empty database, and nothing may be measured: the rule, saying why.
  ShapeChoice c = search_shape(s);
  EXPECT_FALSE(c.decided);
  EXPECT_EQ(c.chosen, (RanksThreads{2, 18}));
  EXPECT_NE(c.why.find("the database has 0 of the 4 shapes' measurements"), std::string::npos)
      << c.why;
  // Each candidate stored under its own identity (its shape is in the key and the plan).
  const double sps[] = {900, 1500, 1400, 700};
  std::vector<std::string> hashes;
  int i = 0;
  for (const RanksThreads& shape : shape_candidates(36, 2)) {
    const Job cj = job_with_shape(rule, shape);
    const BaselineIdentity id = measured_plan_identity(topo_, cj, shape_plan(cj, g));
    EXPECT_EQ(id.key.shape.ranks_per_node, shape.ranks_per_node);
    hashes.push_back(id.plan_hash);
    Baseline b;
    b.sps = sps[i++];
    b.rel_ci = 0.2;  // wide, but a shape's measurement is reused as it is
    b.steps = 10;
    b.bind = id.bind;
    ASSERT_TRUE(store_baseline(db, id, b).ok());
  }
  EXPECT_NE(hashes[0], hashes[1]);
  c = search_shape(s);
  ASSERT_TRUE(c.decided) << c.why;
  EXPECT_EQ(c.chosen, (RanksThreads{6, 6}));
  for (const ShapeMeasurement& m : c.shapes) EXPECT_EQ(m.source, "database");
  // --retune does not take them: with nothing to be measured, the rule again.
  s.remeasure = true;
  c = search_shape(s);
  EXPECT_FALSE(c.decided);
  EXPECT_EQ(c.chosen, (RanksThreads{2, 18}));
  EXPECT_NE(c.why.find("the database has 0 of the 4"), std::string::npos) << c.why;
  std::filesystem::remove_all(dir);
}

// Another machine's export (DLTUNE_TOPO_XML): a launch that tunes measures none of its shapes
// (a run here would time this machine's cores under them and store the figures under that
// machine's key), and says why; what the database has from that machine still counts.
TEST_F(ShapeSearchTest, AnotherMachinesTopologyIsNotMeasuredHere) {
  char dir[] = "/tmp/dltune-shapes-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const Job rule = job({"training.batch.global=288", "training.batch.per_rank=auto"});
  ShapeSearch s;
  s.job = &rule;
  s.topo = &topo_;
  s.worker = "/nonexistent/dltune-worker";  // a measurement would fail, and say so
  s.db_path = std::string(dir) + "/db.sqlite";
  s.work_dir = dir;
  s.measure = true;
  s.budget_s = 30;
  s.elsewhere = "the topology is another machine's (DLTUNE_TOPO_XML quartz.xml)";
  const ShapeChoice c = search_shape(s);
  EXPECT_FALSE(c.decided);
  EXPECT_EQ(c.chosen, (RanksThreads{2, 18}));
  EXPECT_EQ(c.why,
            "one rank per NUMA domain (the rule): the topology is another machine's "
            "(DLTUNE_TOPO_XML quartz.xml): a launch there measures its shapes (the database has "
            "0 of the 4 shapes' measurements)");
  ASSERT_EQ(c.shapes.size(), 4u);
  for (const ShapeMeasurement& m : c.shapes) EXPECT_EQ(m.error, "not measured yet");
  EXPECT_EQ(c.seconds, 0.0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dltune::launcher
