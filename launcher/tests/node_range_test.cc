// `--nodes MIN-MAX` (issue 40): the value's parsing, and the job make_job() shapes from it in
// and out of a Slurm allocation (the allocation's variables set here as salloc sets them).
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <stdlib.h>

#include "launcher/flow/launch_job.h"
#include "launcher/tests/test_topology.h"
#include "topology/topology.h"

#include "dltune/config.h"

namespace dltune::launcher {
namespace {

TEST(ParseNodeCount, ACountOrARange) {
  EXPECT_EQ(*parse_node_count("3"), (std::pair<int, int>{3, 0}));
  EXPECT_EQ(*parse_node_count("2-4"), (std::pair<int, int>{2, 4}));
  EXPECT_EQ(*parse_node_count("2-2"), (std::pair<int, int>{2, 0}));
  EXPECT_EQ(*parse_node_count("1-4096"), (std::pair<int, int>{1, 4096}));
  for (const char* bad : {"", "0", "-3", "3-", "a", "2-x", "1-4097", "4097", "2--3", " 2", "2-3-4",
                          "+2", "99999999999999999999"}) {
    auto n = parse_node_count(bad);
    ASSERT_FALSE(n.ok()) << bad;
    EXPECT_NE(n.error().message().find("is not a node count from 1 to 4096"), std::string::npos)
        << n.error().message();
  }
  auto inverted = parse_node_count("4-2");
  ASSERT_FALSE(inverted.ok());
  EXPECT_EQ(inverted.error().message(), "'4-2': the least nodes (4) are more than the most (2)");
}

// Sets Slurm's allocation variables for the test's life and clears them after.
class NodeRangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    topo_ = testing::test_topology("mpibind_cts1-quartz-smt1.xml");
    ASSERT_FALSE(topo_.cores.empty());
    Clear();
  }
  void TearDown() override { Clear(); }
  static void Clear() {
    for (const char* k : {"SLURM_JOB_ID", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_NTASKS"})
      unsetenv(k);
  }
  static void Allocation(int nodes, int tasks) {
    setenv("SLURM_JOB_ID", "42", 1);
    setenv("SLURM_JOB_NUM_NODES", std::to_string(nodes).c_str(), 1);
    setenv("SLURM_NTASKS", std::to_string(tasks).c_str(), 1);
  }
  Result<Job> job(const std::string& nodes, const std::vector<std::string>& sets, int ranks = 0,
                  const std::string& backend = "slurm") {
    JobOptions o;
    o.recipe =
        std::string(DLTUNE_SOURCE_DIR) + "/tests/launch/data/tiny.yaml";  // 2 ranks, 2 a node
    o.backend = backend;
    o.ranks = ranks;
    auto n = parse_node_count(nodes);
    EXPECT_TRUE(n.ok());
    o.nodes = n->first;
    o.nodes_max = n->second;
    for (const std::string& s : sets) {
      auto ov = recipes::parse_override(s);
      EXPECT_TRUE(ov.ok()) << s;
      if (ov) o.overrides.push_back(*ov);
    }
    return make_job(o, topo_);
  }
  topology::Topology topo_;
};

bool has_note(const Job& j, const std::string& text) {
  for (const std::string& n : j.notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

TEST_F(NodeRangeTest, InsideAnAllocationTheJobTakesItsNodesUpToTheMost) {
  Allocation(3, 6);
  auto j = job("2-4", {});
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_EQ(j->shape.nodes, 3);
  EXPECT_EQ(j->ranks, 6);  // launch.ranks_per_node 2 on each; the recipe's launch.ranks 2 aside
  EXPECT_EQ(j->nodes_max, 4);
  EXPECT_EQ(j->recipe.launch.min_nodes, 2);
  ASSERT_FALSE(j->notes.empty());
  EXPECT_NE(j->notes[0].find("launch.ranks 2 left aside: with --nodes 2-4"), std::string::npos)
      << j->notes[0];
  // More nodes than the most: the job runs on the most; those beyond it and the spare ones
  // are not the job's, and their tasks not its ranks.
  Allocation(5, 5);
  auto capped = job("1-2", {"launch.ranks_per_node=auto"});
  ASSERT_TRUE(capped.ok()) << capped.error().message();
  EXPECT_EQ(capped->shape.nodes, 2);
  EXPECT_EQ(capped->ranks, 2);
  auto spare = job("2-4", {"launch.spare_nodes=2"});
  ASSERT_TRUE(spare.ok()) << spare.error().message();
  EXPECT_EQ(spare->shape.nodes, 3);
  // launch.min_nodes is the range's least, saying so when the recipe gave another.
  auto min = job("2-4", {"launch.min_nodes=1"});
  ASSERT_TRUE(min.ok()) << min.error().message();
  EXPECT_EQ(min->recipe.launch.min_nodes, 2);
  EXPECT_TRUE(has_note(*min, "launch.min_nodes 1 replaced by 2"));
  // The dry run and the launch say what the range means here.
  EXPECT_TRUE(has_note(*min, "--nodes 2-4: 4 node(s) of this allocation; a lost node's place"));
}

TEST_F(NodeRangeTest, FewerNodesThanTheLeastOrAFixedRankCountIsRefused) {
  Allocation(1, 2);
  auto few = job("2-4", {});
  ASSERT_FALSE(few.ok());
  EXPECT_EQ(few.error().message(), "--nodes 2-4: this allocation has 1 node(s), fewer than 2");
  Allocation(3, 6);
  auto fixed = job("2-4", {}, 4);
  ASSERT_FALSE(fixed.ok());
  EXPECT_NE(fixed.error().message().find("-n 4 with --nodes 2-4: the job's ranks follow its nodes"),
            std::string::npos)
      << fixed.error().message();
  auto local = job("2-4", {}, 0, "local");
  ASSERT_FALSE(local.ok());
  EXPECT_NE(local.error().message().find("--nodes 2-4 needs the slurm backend"), std::string::npos);
}

TEST_F(NodeRangeTest, OutsideAnAllocationTheJobIsPlannedOnTheLeast) {
  auto j = job("2-4", {});  // the launch asks salloc for 2-4 nodes and runs again inside
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_EQ(j->shape.nodes, 2);
  EXPECT_EQ(j->ranks, 4);
  EXPECT_EQ(j->nodes_max, 4);
  EXPECT_TRUE(has_note(*j, "--nodes 2-4: planned here for 2 node(s); the launch asks salloc"));
}

// -H / --hostfile (issue 39): the hosts are the job's nodes, the ranks dealt evenly over them,
// and its `dltune run` names them with the ranks each runs.
TEST_F(NodeRangeTest, HostsAreTheNodesAndTheRunNamesThem) {
  auto with_hosts = [&](const std::string& list, int ranks, const std::vector<std::string>& sets,
                        int nodes = 0, const std::string& backend = "local") {
    JobOptions o;
    o.recipe = std::string(DLTUNE_SOURCE_DIR) + "/tests/launch/data/tiny.yaml";
    o.backend = backend;
    o.ranks = ranks;
    o.nodes = nodes;
    o.hosts = *parse_host_option(list);
    for (const std::string& s : sets) o.overrides.push_back(*recipes::parse_override(s));
    return make_job(o, topo_);
  };
  // The recipe's 2 ranks over two hosts: one each.
  auto j = with_hosts("n1,n2", 0, {});
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_EQ(j->shape.nodes, 2);
  EXPECT_EQ(j->shape.ranks_per_node, 1);
  EXPECT_EQ(j->hosts, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_TRUE(has_note(*j, "the job is planned with this machine's 36 cores (the hosts' own"));
  auto here = with_hosts("localhost,n2", 0, {});  // this machine is one of them: no note
  ASSERT_TRUE(here.ok()) << here.error().message();
  EXPECT_FALSE(has_note(*here, "the job is planned with this machine's"));
  const std::vector<std::string> p = launch_prefix(*j);
  const std::vector<std::string> want = {"dltune", "run", "-n", "2", "-H", "n1:1,n2:1"};
  ASSERT_GE(p.size(), want.size());
  EXPECT_EQ(std::vector<std::string>(p.begin(), p.begin() + 6), want);
  // No rank count anywhere: every host's slots when they are equal.
  auto slots = with_hosts("a:4,b:4,c:4", 0, {"launch.ranks=auto", "launch.ranks_per_node=auto"});
  ASSERT_TRUE(slots.ok()) << slots.error().message();
  EXPECT_EQ(slots->ranks, 12);
  EXPECT_EQ(slots->shape.ranks_per_node, 4);
  EXPECT_FALSE(slots->shape_auto);  // the hosts are not this machine: no shape search here
  // --nodes takes the first hosts; the 1-rank baseline runs on the first.
  auto two = with_hosts("a:2,b:2,c:2", 4, {}, 2);
  ASSERT_TRUE(two.ok()) << two.error().message();
  EXPECT_EQ(two->hosts.size(), 2u);
  const std::vector<std::string> base = launch_prefix(baseline_job(*two));
  EXPECT_EQ(base[5], "a:1");
  // Refused: ranks that do not divide, a host with too few slots, Slurm, a range.
  EXPECT_FALSE(with_hosts("n1,n2", 3, {}).ok());
  auto few = with_hosts("a:4,b:2", 8, {});
  ASSERT_FALSE(few.ok());
  EXPECT_NE(few.error().message().find("b has 2 slots"), std::string::npos)
      << few.error().message();
  EXPECT_FALSE(with_hosts("n1,n2", 2, {}, 0, "slurm").ok());
  EXPECT_FALSE(with_hosts("n1,n2", 2, {}, 3).ok());
}

}  // namespace
}  // namespace dltune::launcher
