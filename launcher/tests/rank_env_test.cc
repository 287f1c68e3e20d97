// The rank variables both backends give (torchrun's and mpirun's names), Slurm's task identity,
// host lists, free ports, and what --plan means to external programs.
#include "launcher/backend/rank_env.h"

#include <map>
#include <string>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/paths.h"
#include "launcher/backend/plan_env.h"

namespace dltune::launcher {
namespace {

TEST(RankEnvTest, TorchrunAndMpirunNames) {
  const EnvList env = rank_identity_env({5, 8, 1, 4, 1, 2});
  const std::map<std::string, std::string> m(env.begin(), env.end());
  const std::map<std::string, std::string> want = {{"RANK", "5"},
                                                   {"WORLD_SIZE", "8"},
                                                   {"LOCAL_RANK", "1"},
                                                   {"LOCAL_WORLD_SIZE", "4"},
                                                   {"GROUP_RANK", "1"},
                                                   {"GROUP_WORLD_SIZE", "2"},
                                                   {"OMPI_COMM_WORLD_RANK", "5"},
                                                   {"OMPI_COMM_WORLD_SIZE", "8"},
                                                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                                   {"OMPI_COMM_WORLD_NODE_RANK", "1"}};
  EXPECT_EQ(m, want);
  const EnvList r = rendezvous_env("10.0.0.1", 29500);
  EXPECT_EQ(r, (EnvList{{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}}));
}

// torchrun's OMP_NUM_THREADS, and OpenBLAS's and MKL's: a bound rank's CPUs, else its share.
TEST(RankEnvTest, ThreadsFollowTheBinding) {
  EXPECT_EQ(
      thread_env(4, 16, 4),
      (EnvList{{"OMP_NUM_THREADS", "4"}, {"OPENBLAS_NUM_THREADS", "4"}, {"MKL_NUM_THREADS", "4"}}));
  EXPECT_EQ(thread_env(0, 16, 3)[0].second, "5");  // unbound: 16 CPUs among 3 ranks
  EXPECT_EQ(thread_env(0, 2, 4)[0].second, "1");   // more ranks than CPUs: never 0
  EXPECT_EQ(thread_env(0, 0, 0)[0].second, "1");
  EXPECT_EQ(thread_env(2, 16, 8)[0].second, "2");  // bound: its own CPUs, whatever the node has
}

TEST(RankEnvTest, ParsesSlurmTaskCounts) {
  EXPECT_EQ(*parse_tasks_per_node("4"), (std::vector<int>{4}));
  EXPECT_EQ(*parse_tasks_per_node("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(*parse_tasks_per_node("1,3(x2)"), (std::vector<int>{1, 3, 3}));
  for (const char* bad : {"", "0", "2(x0)", "2(3)", "x", "2(x3", "2,,1", "-1"}) {
    EXPECT_FALSE(parse_tasks_per_node(bad).ok()) << bad;
  }
}

TEST(RankEnvTest, IdentityFromSrunsVariables) {
  std::map<std::string, std::string> env = {
      {"SLURM_PROCID", "4"}, {"SLURM_STEP_NUM_TASKS", "5"}, {"SLURM_LOCALID", "1"},
      {"SLURM_NODEID", "1"}, {"SLURM_STEP_NUM_NODES", "2"}, {"SLURM_STEP_TASKS_PER_NODE", "3,2"}};
  auto get = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto id = identity_from_slurm(get);
  ASSERT_TRUE(id.ok()) << id.error().message();
  EXPECT_EQ(id->rank, 4);
  EXPECT_EQ(id->size, 5);
  EXPECT_EQ(id->local_rank, 1);
  EXPECT_EQ(id->local_size, 2);  // node 1 runs 2 of the 5 tasks
  EXPECT_EQ(id->node, 1);
  EXPECT_EQ(id->nodes, 2);
  // The job's variables stand in for the step's.
  env.erase("SLURM_STEP_NUM_TASKS");
  env["SLURM_NTASKS"] = "5";
  env.erase("SLURM_STEP_TASKS_PER_NODE");
  env["SLURM_TASKS_PER_NODE"] = "3,2";
  EXPECT_TRUE(identity_from_slurm(get).ok());
  env.erase("SLURM_PROCID");
  auto missing = identity_from_slurm(get);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("SLURM_PROCID is not set"), std::string::npos);
  env["SLURM_PROCID"] = "4";
  env["SLURM_LOCALID"] = "2";  // node 1 has only 2 tasks
  EXPECT_FALSE(identity_from_slurm(get).ok());
}

TEST(RankEnvTest, FirstHostOfASlurmHostList) {
  EXPECT_EQ(*first_host("n1"), "n1");
  EXPECT_EQ(*first_host("n1,n2"), "n1");
  EXPECT_EQ(*first_host("n[1-2]"), "n1");
  EXPECT_EQ(*first_host("gpu[007-009,12]"), "gpu007");
  EXPECT_EQ(*first_host("rack[2-3]-node,x"), "rack2-node");
  EXPECT_FALSE(first_host("").ok());
  EXPECT_FALSE(first_host("[1-2]").ok());
  EXPECT_FALSE(first_host("n[x]").ok());
}

TEST(RankEnvTest, AFreePortIsFreeAndOnlyOnThisMachinesAddresses) {
  auto port = free_tcp_port("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.error().message();
  EXPECT_GT(*port, 0);
  // Nothing holds it: a listener can take it.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(*port));
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  close(fd);
  EXPECT_FALSE(free_tcp_port("192.0.2.1").ok());  // TEST-NET-1: not this machine's
  EXPECT_FALSE(free_tcp_port("not-an-address").ok());
}

// A whole plan (recipes/plan.h) around `collectives` and `placement` JSON, for a `shape` job.
std::string plan_text(const std::string& collectives, const std::string& placement,
                      const std::string& job = R"({"nodes":2,"ranks_per_node":2})") {
  return R"({"version":1,"collectives":)" + collectives + R"(,"placement":)" + placement +
         R"(,"training":{"per_rank_batch":8,"global_batch":32,"scaling":"weak"},"job":)" + job +
         "}";
}

recipes::Plan plan_of(const std::string& text) {
  auto p = recipes::parse_plan(text);
  EXPECT_TRUE(p.ok()) << p.error().message();
  return p.ok() ? *p : recipes::Plan{};
}

TEST(PlanEnvTest, RulesAndPlacementFromThePlan) {
  const recipes::Plan plan =
      plan_of(plan_text(R"({"allreduce":[{"min_bytes":0,"max_bytes":4096,"algo":"rd"},)"
                        R"({"min_bytes":4096,"max_bytes":18446744073709551615,"algo":"ring"}]})",
                        R"([{"local_rank":0,"cpus":[0,1],"gpu":-1,"nic":"mlx5_0"},)"
                        R"({"local_rank":1,"cpus":[2,3],"gpu":1,"nic":""}])"));
  PlanEnv pe = plan_env_for(plan, 4, 2);
  EXPECT_TRUE(pe.notes.empty()) << pe.notes[0];
  EXPECT_NE(pe.ompi_rules.find("4 # comm size"), std::string::npos) << pe.ompi_rules;
  ASSERT_EQ(pe.placement.size(), 2u);
  EXPECT_EQ(pe.placement[0].cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(pe.placement[0].cpuset, "0-1");
  EXPECT_EQ(pe.placement[0].nic, "mlx5_0");
  EXPECT_EQ(pe.placement[1].gpu, 1);
  // Made for another job shape: applied with a note naming both shapes; a placement for
  // another number of ranks per node is not used, and said.
  PlanEnv other = plan_env_for(plan, 3, 3);
  EXPECT_TRUE(other.placement.empty());
  ASSERT_EQ(other.notes.size(), 2u);
  EXPECT_NE(other.notes[0].find("tuned for a 2x2 job (nodes x ranks per node), this one is 1x3"),
            std::string::npos)
      << other.notes[0];
  EXPECT_NE(other.notes[1].find("places 2 rank(s) per node, the job has 3"), std::string::npos);
  EXPECT_FALSE(other.ompi_rules.empty());
  // Where Open MPI lacks the plan's algorithm, the note says what it runs instead.
  const recipes::Plan shm = plan_of(plan_text(
      R"({"allreduce":[{"min_bytes":0,"max_bytes":18446744073709551615,"algo":"shm"}]})", "[]"));
  PlanEnv approx = plan_env_for(shm, 4, 2);
  const auto told = notes_for(approx, {"python3", "train.py"});
  ASSERT_EQ(told.size(), 1u);
  EXPECT_NE(told[0].find("Open MPI: allreduce: shm (reduction in node-shared memory) has "
                         "no coll/tuned equivalent; using recursive_doubling"),
            std::string::npos)
      << told[0];
  // dltune's own worker runs the plan's shm itself: Open MPI's stand-in is not its business.
  EXPECT_TRUE(notes_for(approx, {"/opt/dltune/bin/dltune-worker", "train"}).empty());
}

TEST(PlanEnvTest, WhatIsNotAPlanIsRefused) {
  char dir[] = "/tmp/dltune-plan-env-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/p.json";
  for (const char* text : {"just text", R"({"hello":1})", R"({"model":"lenet","steps":10})",
                           R"({"placement":[{"local_rank":0,"cpus":["x"]}]})"}) {
    ASSERT_TRUE(paths::write_file_atomic(path, text).ok());
    auto p = read_plan_file(path);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.error().exit_code(), 2) << text;
    EXPECT_NE(p.error().message().find("is not a dltune plan"), std::string::npos)
        << p.error().message();
  }
  auto missing = read_plan_file(std::string(dir) + "/none.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().exit_code(), 2);
  (void)std::system(("rm -rf " + std::string(dir)).c_str());
}

TEST(PlanEnvTest, WritesThePlanAndTheRules) {
  char dir[] = "/tmp/dltune-plan-env-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string plan =
      plan_text(R"({"allreduce":[{"min_bytes":0,"max_bytes":18446744073709551615,"algo":"rd"}]})",
                "[]", R"({"nodes":1,"ranks_per_node":4})");
  auto env = write_plan_files(plan_env_for(plan_of(plan), 4, 4), plan, "", dir);
  ASSERT_TRUE(env.ok()) << env.error().message();
  const std::map<std::string, std::string> m(env->begin(), env->end());
  EXPECT_EQ(m.at("DLTUNE_PLAN"), std::string(dir) + "/plan.json");
  EXPECT_EQ(m.at("OMPI_MCA_coll_tuned_use_dynamic_rules"), "1");
  EXPECT_EQ(m.at("OMPI_MCA_coll_tuned_dynamic_rules_filename"),
            std::string(dir) + "/ompi_rules.conf");
  EXPECT_EQ(access(m.at("DLTUNE_PLAN").c_str(), R_OK), 0);
  EXPECT_EQ(access(m.at("OMPI_MCA_coll_tuned_dynamic_rules_filename").c_str(), R_OK), 0);
  unlink(m.at("DLTUNE_PLAN").c_str());
  unlink(m.at("OMPI_MCA_coll_tuned_dynamic_rules_filename").c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace dltune::launcher
