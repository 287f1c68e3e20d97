// `dltune run --backend slurm` inside a real allocation on a private two-node Slurm cluster
// (tests/slurm/cluster.sh: munged, slurmctld, two slurmd on loopback). Skipped, with the
// reason, when the Slurm or munge packages are missing.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

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
                          std::vector<std::pair<std::string, std::string>> env = {},
                          const char* stdin_data = nullptr) {
    std::vector<std::string> argv = {"/usr/bin/salloc", "--quiet", "-N", "2", "-n", "4"};
    return dltune_run(argv, std::move(run_args), std::move(program), std::move(env), stdin_data);
  }
  // [prefix...] dltune run --backend slurm <args> -- <program> --marker M
  RunResult dltune_run(std::vector<std::string> argv, std::vector<std::string> run_args,
                       std::vector<std::string> program,
                       std::vector<std::pair<std::string, std::string>> env = {},
                       const char* stdin_data = nullptr) {
    argv.insert(argv.end(), {binary("dltune"), "run", "--backend", "slurm"});
    argv.insert(argv.end(), run_args.begin(), run_args.end());
    argv.push_back("--");
    argv.insert(argv.end(), program.begin(), program.end());
    argv.push_back("--marker");
    argv.push_back(marker_);
    RunOptions opts;
    opts.env = std::move(env);
    opts.env.emplace_back("SLURM_CONF", g_cluster_dir + "/slurm.conf");
    opts.limit_s = 60;
    opts.stdin_data = stdin_data;
    return run(argv, opts);
  }
  std::string marker_;
};

TEST_F(SlurmLaunchTest, RanksSpanBothNodesAndWireUp) {
  const std::string plan = g_cluster_dir + "/plan.json";
  FILE* f = std::fopen(plan.c_str(), "w");
  std::fputs(R"({"version":1,"collectives":{"allreduce":[{"min_bytes":0,)"
             R"("max_bytes":18446744073709551615,"algo":"rd","segment_bytes":0}]},)"
             R"("training":{"per_rank_batch":1,"global_batch":4,"scaling":"weak"},)"
             R"("job":{"nodes":2,"ranks_per_node":2}})",
             f);
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
  EXPECT_NE(r.out.find(R"(plan={"version":1,"collectives":{"allreduce":[{"min_bytes":0,)"),
            std::string::npos)
      << r.out;
}

TEST_F(SlurmLaunchTest, TaggedOutputUsesRankPrefixes) {
  auto r = in_allocation({"-n", "4", "--tag-output"}, {binary("pmix_probe")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[3] probe rank=3 size=4"), std::string::npos) << r.out;
}

// --output-filename under srun: each task's lines (srun --label tells them apart) in its own
// files, timestamped; :nocopy prints none of them.
TEST_F(SlurmLaunchTest, OutputFilenameKeepsEachTasksLines) {
  char tmpl[] = "/tmp/dltune-slurm-output-XXXXXX";
  const std::string base = mkdtemp(tmpl);
  auto r = in_allocation({"-n", "4", "--output-filename", base + ":nocopy", "--timestamp-output"},
                         {"/bin/sh", "-c", "echo out $RANK; echo err $RANK >&2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const std::string stamp = R"(\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\] )";
  for (int rank = 0; rank < 4; ++rank) {
    const std::string folder = base + "/1/rank." + std::to_string(rank);
    for (const std::string stream : {"out", "err"}) {
      std::ifstream in(folder + "/std" + stream);
      const std::string text((std::istreambuf_iterator<char>(in)), {});
      EXPECT_TRUE(
          std::regex_match(text, std::regex(stamp + stream + " " + std::to_string(rank) + "\n")))
          << folder << "/std" << stream << ": " << text;
    }
  }
  std::filesystem::remove_all(base);
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
    int exit_code;  // as mpirun gives it
  };
  for (const Case& c : {Case{"exit3", "3", "rank 3 on n2 exited with code 3", 3},
                        Case{"kill-in-fence", "1", "rank 1 on n1 was killed", 128 + 9}}) {
    SCOPED_TRACE(c.fault);
    auto r = in_allocation({"-n", "4"},
                           {binary("pmix_probe"), "--fault", c.fault, "--fault-rank", c.rank});
    EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
    EXPECT_LT(r.seconds, 10.0);
    EXPECT_NE(r.err.find(std::string("dltune run: ") + c.expect), std::string::npos) << r.err;
    EXPECT_TRUE(processes_with(marker_).empty()) << "a rank survived " << c.fault;
  }
}

// Every task gets the variables the local backend gives a rank (dltune-rank-env sets them from
// srun's), and one rendezvous for the job: rank 0's node and a port free there. srun decides
// how many tasks each node runs; the variables must agree with where the tasks ran.
TEST_F(SlurmLaunchTest, TasksGetTorchAndOpenMpiVariables) {
  auto r = in_allocation(
      {"-n", "4"},
      {"/bin/sh", "-c",
       "echo \"rank=$RANK/$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE "
       "group=$GROUP_RANK/$GROUP_WORLD_SIZE ompi=$OMPI_COMM_WORLD_RANK/$OMPI_COMM_WORLD_SIZE/"
       "$OMPI_COMM_WORLD_LOCAL_RANK/$OMPI_COMM_WORLD_LOCAL_SIZE node=$SLURMD_NODENAME "
       "task=$SLURM_PROCID master=$MASTER_ADDR:$MASTER_PORT\""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int, std::set<int>> locals;  // node -> local ranks seen
  std::map<int, int> local_size;        // node -> LOCAL_WORLD_SIZE
  std::set<int> ranks, ports;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) {
    int rank, local, lsize, group, orank, olocal, olsize, node, task, port;
    ASSERT_EQ(
        std::sscanf(l.c_str(),
                    "rank=%d/4 local=%d/%d group=%d/2 ompi=%d/4/%d/%d node=n%d task=%d "
                    "master=127.0.0.1:%d",
                    &rank, &local, &lsize, &group, &orank, &olocal, &olsize, &node, &task, &port),
        10)
        << l << "\nin\n"
        << r.out;
    --node;
    EXPECT_EQ(rank, task) << l;     // RANK is Slurm's task id
    EXPECT_EQ(group, node) << l;    // GROUP_RANK is the node's index
    EXPECT_EQ(orank, rank) << l;    // OMPI_COMM_WORLD_RANK
    EXPECT_EQ(olocal, local) << l;  // OMPI_COMM_WORLD_LOCAL_RANK
    EXPECT_EQ(olsize, lsize) << l;  // OMPI_COMM_WORLD_LOCAL_SIZE
    ranks.insert(rank);
    locals[node].insert(local);
    local_size[node] = lsize;
    ports.insert(port);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3})) << r.out;
  ASSERT_EQ(locals.size(), 2u) << "both nodes ran tasks:\n" << r.out;
  for (const auto& [node, seen] : locals) {
    EXPECT_EQ(static_cast<int>(seen.size()), local_size[node]) << r.out;
    EXPECT_EQ(*seen.rbegin(), local_size[node] - 1) << r.out;
  }
  EXPECT_EQ(ports.size(), 1u) << "one MASTER_PORT per job:\n" << r.out;
}

// --plan under Slurm: every task, on both nodes, gets the plan's file and Open MPI rules made
// for the job's size.
TEST_F(SlurmLaunchTest, PlanReachesExternalProgramsOnEveryNode) {
  const std::string plan = g_cluster_dir + "/ext-plan.json";
  FILE* f = std::fopen(plan.c_str(), "w");
  std::fputs(R"({"version":1,"collectives":{"allreduce":[{"min_bytes":0,)"
             R"("max_bytes":18446744073709551615,"algo":"ring","segment_bytes":0}]},)"
             R"("training":{"per_rank_batch":1,"global_batch":2,"scaling":"weak"},)"
             R"("job":{"nodes":2,"ranks_per_node":1}})",
             f);
  std::fclose(f);
  auto r =
      in_allocation({"-n", "2", "--nodes", "2", "--plan", plan},
                    {"/bin/sh", "-c",
                     "echo \"node=$SLURMD_NODENAME dyn=$OMPI_MCA_coll_tuned_use_dynamic_rules "
                     "rules=$(grep '# comm size' \"$OMPI_MCA_coll_tuned_dynamic_rules_filename\") "
                     "plan=$(grep -c ring \"$DLTUNE_PLAN\")\""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("node=n1 dyn=1 rules=2 # comm size plan=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("node=n2 dyn=1 rules=2 # comm size plan=1"), std::string::npos) << r.out;
}

// Standard input reaches task 0 only, as under mpirun (srun's default is every task).
TEST_F(SlurmLaunchTest, StandardInputGoesToTaskZero) {
  auto r = in_allocation({"-n", "2", "--tag-output"},
                         {"/bin/sh", "-c", "n=0; while read l; do n=$((n+1)); done; echo lines=$n"},
                         {}, "one\ntwo\nthree\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[0] lines=3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] lines=0"), std::string::npos) << r.out;
}

// --nodes outside an allocation: dltune obtains one of that shape (salloc), so the ranks span
// the nodes asked for; inside an allocation, more nodes than it has is refused.
TEST_F(SlurmLaunchTest, NodesOutsideAnAllocationAreObtained) {
  auto r = dltune_run({}, {"-n", "2", "--nodes", "2"}, {binary("pmix_probe")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("host=n1 peers=ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("host=n2 peers=ok"), std::string::npos) << r.out;
  auto over = dltune_run({"/usr/bin/salloc", "--quiet", "-N", "1", "-n", "2"},
                         {"-n", "2", "--nodes", "2"}, {binary("pmix_probe")});
  EXPECT_EQ(over.exit_code, 2) << over.err;
  EXPECT_NE(over.err.find("--nodes 2: this allocation has 1 node(s)"), std::string::npos)
      << over.err;
  EXPECT_EQ(over.out, "");
}

}  // namespace
}  // namespace dltune::testing
