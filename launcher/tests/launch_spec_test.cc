// Unit tests of the pure parts of the launch backends: spec validation, program lookup,
// srun's command line and its task-status lines, EnvBlock, TempDir.
#include "launcher/backend/launch_spec.h"

#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/backend/env_block.h"
#include "launcher/backend/slurm_backend.h"
#include "launcher/backend/srun_output.h"
#include "launcher/backend/temp_dir.h"

namespace dltune::launcher {
namespace {

TEST(LaunchSpecTest, ValidatesUsage) {
  LaunchSpec spec;
  EXPECT_EQ(validate_spec(spec).error().kind(), ErrorKind::kInvalidInput);  // no program
  spec.argv = {"true"};
  spec.nranks = 0;
  auto zero = validate_spec(spec);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message().find("at least 1"), std::string::npos);
  spec.nranks = 2;
  EXPECT_TRUE(validate_spec(spec).ok());
  spec.argv = {"no-such-program-dltune"};
  EXPECT_EQ(validate_spec(spec).error().kind(), ErrorKind::kNotFound);
}

TEST(LaunchSpecTest, FindsProgramsLikeExecvp) {
  auto sh = find_program("sh");
  ASSERT_TRUE(sh.ok());
  EXPECT_EQ(access(sh->c_str(), X_OK), 0);
  EXPECT_EQ(*find_program("/bin/sh"), "/bin/sh");
  EXPECT_EQ(find_program("/nonexistent/x").error().kind(), ErrorKind::kNotFound);
  EXPECT_EQ(find_program("/tmp").error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(find_program("").error().kind(), ErrorKind::kInvalidInput);
  auto dir = TempDir::create_in_tmp("dltune-test-");
  ASSERT_TRUE(dir.ok());
  const std::string plain = dir->path() + "/plain";
  std::ofstream(plain) << "data";
  auto not_exec = find_program(plain);
  ASSERT_FALSE(not_exec.ok());
  EXPECT_NE(not_exec.error().message().find("not executable"), std::string::npos);
}

TEST(LaunchSpecTest, ParsesBackends) {
  EXPECT_EQ(*parse_backend("local"), Backend::kLocal);
  EXPECT_EQ(*parse_backend("slurm"), Backend::kSlurm);
  EXPECT_EQ(parse_backend("mpirun").error().kind(), ErrorKind::kInvalidInput);
}

TEST(SrunTest, BuildsTheCommandLine) {
  LaunchSpec spec;
  spec.nranks = 4;
  spec.argv = {"probe", "--x"};
  spec.output.tag = true;
  spec.bind = topology::BindPolicy::kCore;
  spec.nodes = 2;
  const auto argv = srun_command("/usr/bin/srun", "/b/dltune-rank-env", spec);
  const std::vector<std::string> want = {"/usr/bin/srun",
                                         "--mpi=pmix",
                                         "--kill-on-bad-exit=1",
                                         "--ntasks=4",
                                         "--input=0",
                                         "--nodes=2",
                                         "--ntasks-per-node=2",
                                         "--label",
                                         "--cpu-bind=cores",
                                         "--",
                                         "/b/dltune-rank-env",
                                         "probe",
                                         "--x"};
  EXPECT_EQ(argv, want);
  // Nodes lost earlier are left out.
  spec.exclude = {"n3", "n5"};
  const auto without = srun_command("/usr/bin/srun", "/b/dltune-rank-env", spec);
  EXPECT_NE(std::find(without.begin(), without.end(), "--exclude=n3,n5"), without.end());
  EXPECT_LT(std::find(without.begin(), without.end(), "--exclude=n3,n5"),
            std::find(without.begin(), without.end(), "--"));
  // ... sharing the CPUs the lost node's step still holds (until Slurm times the node out).
  EXPECT_NE(std::find(without.begin(), without.end(), "--overlap"), without.end());
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--overlap"), argv.end());
}

// The failed task's node is the outcome's host (the launch asks it whether it still answers),
// both for srun's own task-status lines and for an MPI_Abort it names.
TEST(SrunTest, NamesTheFailedRanksHost) {
  SrunFailures w;
  for (const char* line :
       {"srun: error: n1: task 0: Terminated", "srun: error: n3: task 2: Killed"}) {
    EXPECT_FALSE(filter_srun_line(w, true, line).has_value()) << line;
  }
  LaunchOutcome out{1, "srun exited with code 1", false, ""};
  name_failure(out, w, PlanEnv{});
  EXPECT_EQ(out.host, "n3");
  EXPECT_EQ(out.exit_code, 137);
  EXPECT_EQ(out.message, "rank 2 on n3 was killed by signal 9 (Killed)");
}

// A plan's placement binds each local rank through srun's CPU masks, instead of --bind's policy.
TEST(SrunTest, BindsThePlansCpus) {
  LaunchSpec spec;
  spec.nranks = 4;
  spec.nodes = 2;
  spec.argv = {"probe"};
  spec.bind = topology::BindPolicy::kCore;
  spec.local_cpus = {{0}, {1, 2, 5}};
  const auto argv = srun_command("/usr/bin/srun", "/b/dltune-rank-env", spec);
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--cpu-bind=mask_cpu:0x1,0x26"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--ntasks-per-node=2"), argv.end());
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--cpu-bind=cores"), argv.end());
}

TEST(SrunTest, ParsesTaskStatusLines) {
  auto a = parse_srun_failure("srun: error: n1: task 2: Exited with exit code 3");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->host, "n1");
  EXPECT_EQ(a->rank, 2);
  EXPECT_EQ(a->exit_code, 3);
  EXPECT_EQ(a->describe(), "rank 2 on n1 exited with code 3");
  EXPECT_EQ(a->exit_status(), 3);
  auto b = parse_srun_failure("srun: error: vm-n2: tasks 0,2-3: Killed");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->host, "vm-n2");
  EXPECT_EQ(b->rank, 0);
  EXPECT_EQ(b->signal, "Killed");
  EXPECT_EQ(b->describe(), "rank 0 on vm-n2 was killed by signal 9 (Killed)");
  // A pipeline's rank with its stage (rank r runs stage r % S of replica r / S).
  PlanEnv pe;
  pe.stages = 2;
  EXPECT_EQ(a->describe(&pe), "rank 2 (stage 0 of replica 1) on n1 exited with code 3");
  EXPECT_EQ(b->exit_status(), 128 + 9);  // as mpirun reports a rank killed by SIGKILL
  EXPECT_EQ(parse_srun_failure("srun: error: n1: task 1: Segmentation fault")->exit_status(),
            128 + 11);
  EXPECT_EQ(parse_srun_failure("srun: error: n1: task 1: Mystery")->exit_status(), 1);
  EXPECT_FALSE(parse_srun_failure("hello").has_value());
  EXPECT_FALSE(parse_srun_failure("srun: error: Unable to allocate resources").has_value());
}

TEST(SrunTest, PicksTheCauseAmongTaskStatusLines) {
  auto line = [](const char* l) { return *parse_srun_failure(l); };
  // A rank killed in a fence: its peers exit first, srun terminates the rest.
  auto killed = first_failure({line("srun: error: n1: tasks 0,2: Exited with exit code 5"),
                               line("srun: error: n2: task 3: Terminated"),
                               line("srun: error: n1: task 1: Killed")});
  ASSERT_TRUE(killed.has_value());
  EXPECT_EQ(killed->rank, 1);
  // A rank exits 3: srun terminates the others.
  auto exited = first_failure({line("srun: error: n1: tasks 0-2: Terminated"),
                               line("srun: error: n2: task 3: Exited with exit code 3")});
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->rank, 3);
  EXPECT_FALSE(first_failure({}).has_value());
}

TEST(EnvBlockTest, SetsReplacesAndKeeps) {
  char a[] = "A=1";
  char b[] = "B=2";
  char* src[] = {a, b, nullptr};
  EnvBlock env(src);
  EXPECT_STREQ(env.find("A"), "1");
  env.set("A", "x");
  EXPECT_STREQ(env.find("A"), "x");
  env.set("B", "y", /*overwrite=*/false);
  EXPECT_STREQ(env.find("B"), "2");
  env.set("C", "3");
  EXPECT_STREQ(env.find("C"), "3");
  EXPECT_EQ(env.find("AB"), nullptr);
  int n = 0;
  for (char** p = env.data(); *p != nullptr; ++p) ++n;
  EXPECT_EQ(n, 3);
  EnvBlock empty;
  empty.set("Z", "1");
  EXPECT_STREQ(empty.find("Z"), "1");
}

TEST(TempDirTest, RemovesTheWholeTree) {
  std::string path;
  {
    auto dir = TempDir::create_in_tmp("dltune-test-");
    ASSERT_TRUE(dir.ok());
    path = dir->path();
    ASSERT_EQ(mkdir((path + "/sub").c_str(), 0700), 0);
    std::ofstream(path + "/sub/file") << "x";
  }
  struct stat st {};
  EXPECT_NE(stat(path.c_str(), &st), 0);
  EXPECT_EQ(TempDir::create("/nonexistent", "x").error().kind(), ErrorKind::kIo);
}

}  // namespace
}  // namespace dltune::launcher
