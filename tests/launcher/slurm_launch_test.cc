// `dltune run --backend slurm` inside a real allocation on a private two-node Slurm cluster
// (tests/slurm/cluster.sh: munged, slurmctld, two slurmd on loopback). Skipped, with the
// reason, when the Slurm or munge packages are missing.
#include <cstdlib>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run_helper.h"

namespace dltune::testing {
namespace {

std::string g_cluster_dir;  // "" when the cluster could not start
std::string g_skip_reason;

std::string cluster_script() {
  const char* src = std::getenv("DLTUNE_SOURCE_DIR");
  return std::string(src != nullptr ? src : ".") + "/tests/slurm/cluster.sh";
}

class SlurmLaunchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/dltune-slurm-test-XXXXXX";
    const std::string parent = mkdtemp(tmpl);
    const std::string dir = parent + "/cluster";
    auto r = run({"/bin/bash", cluster_script(), "start", dir, "2", "4"}, {{}, 60, -1, 1});
    if (r.exit_code == 0) {
      g_cluster_dir = dir;
    } else if (r.exit_code == 77) {
      g_skip_reason = "Slurm test cluster unavailable: " + r.err;
      rmdir(parent.c_str());
    } else {
      g_skip_reason = "";
      ADD_FAILURE() << "cluster.sh start failed (" << r.exit_code << "):\n" << r.err;
      rmdir(parent.c_str());
    }
  }
  static void TearDownTestSuite() {
    if (g_cluster_dir.empty()) return;
    run({"/bin/bash", cluster_script(), "stop", g_cluster_dir});
    rmdir(g_cluster_dir.substr(0, g_cluster_dir.rfind('/')).c_str());
    g_cluster_dir.clear();
  }
  void SetUp() override {
    if (g_cluster_dir.empty()) GTEST_SKIP() << g_skip_reason;
    marker_ = unique_marker();
  }
  void TearDown() override {
    if (!g_cluster_dir.empty()) {
      EXPECT_TRUE(processes_with(marker_).empty()) << "a rank survived the launch";
    }
  }
  // salloc -N 2 -n 4 dltune run --backend slurm <args> -- <program> --marker M
  RunResult in_allocation(std::vector<std::string> run_args, std::vector<std::string> program,
                          std::vector<std::pair<std::string, std::string>> env = {}) {
    std::vector<std::string> argv = {"/usr/bin/salloc", "--quiet", "-N",        "2",    "-n", "4",
                                     binary("dltune"),  "run",     "--backend", "slurm"};
    argv.insert(argv.end(), run_args.begin(), run_args.end());
    argv.push_back("--");
    argv.insert(argv.end(), program.begin(), program.end());
    argv.push_back("--marker");
    argv.push_back(marker_);
    RunOptions opts;
    opts.env = std::move(env);
    opts.env.emplace_back("SLURM_CONF", g_cluster_dir + "/slurm.conf");
    opts.limit_s = 60;
    return run(argv, opts);
  }
  std::string marker_;
};

TEST_F(SlurmLaunchTest, RanksSpanBothNodesAndWireUp) {
  const std::string plan = g_cluster_dir + "/plan.json";
  FILE* f = std::fopen(plan.c_str(), "w");
  std::fputs(R"({"algo":"rd"})", f);
  std::fclose(f);
  auto r = in_allocation({"-n", "4", "--plan", plan}, {binary("pmix_probe")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string want = "probe rank=" + std::to_string(rank) + " size=4 ";
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("host=n1 peers=ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("host=n2 peers=ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/2 host="), std::string::npos) << "two nodes expected:\n" << r.out;
  EXPECT_EQ(r.out.find("peers=bad"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"(plan={"algo":"rd"})"), std::string::npos) << r.out;
}

TEST_F(SlurmLaunchTest, TaggedOutputUsesRankPrefixes) {
  auto r = in_allocation({"-n", "4", "--tag-output"}, {binary("pmix_probe")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[3] probe rank=3 size=4"), std::string::npos) << r.out;
}

TEST_F(SlurmLaunchTest, OpenMpiAcrossNodes) {
  if (access(binary("mpi_probe").c_str(), X_OK) != 0) GTEST_SKIP() << "built without Open MPI";
  // Both simulated nodes share one host name, so Open MPI's shared-memory segments would
  // collide: TCP only (runtime-facts.md).
  auto r = in_allocation({"-n", "4"}, {binary("mpi_probe"), "4"},
                         {{"OMPI_MCA_btl", "self,tcp"}, {"OMPI_MCA_btl_tcp_if_include", "lo"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("mpi rank=0 size=4 sum=10"), std::string::npos) << r.out << r.err;
}

TEST_F(SlurmLaunchTest, AFailingRankIsNamedWithItsNode) {
  struct Case {
    const char* fault;
    const char* rank;
    const char* expect;
  };
  for (const Case& c : {Case{"exit3", "3", "rank 3 on n2 exited with code 3"},
                        Case{"kill-in-fence", "1", "rank 1 on n1 was killed"}}) {
    SCOPED_TRACE(c.fault);
    auto r = in_allocation({"-n", "4"},
                           {binary("pmix_probe"), "--fault", c.fault, "--fault-rank", c.rank});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_LT(r.seconds, 10.0);
    EXPECT_NE(r.err.find(std::string("dltune run: ") + c.expect), std::string::npos) << r.err;
    EXPECT_TRUE(processes_with(marker_).empty()) << "a rank survived " << c.fault;
  }
}

}  // namespace
}  // namespace dltune::testing
