// launcher/slurm_backend.h's parse_kill_wait, grow_refusal_hint, and its count_boot_ids and
// count_node_machines: how many machines a Slurm allocation's nodes are, from one boot id per node.
// count_node_machines runs against a fake srun first on PATH (no Slurm is needed), which records
// its arguments and prints what a test asks of it, or hangs for the timeout.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "launcher/backend/slurm_backend.h"
#include "launcher/backend/temp_dir.h"

namespace dltune::launcher {
namespace {

constexpr const char* kA = "0f3a9c2e-6b1d-4e8f-9a7c-5d2b1e0f4c3a";
constexpr const char* kB = "7c1e5a90-2d4b-4f6e-8b3a-1e9d0c7f2a65";

TEST(NodeMachinesTest, CountsDistinctBootIds) {
  const std::string a(kA), b(kB);
  EXPECT_EQ(*count_boot_ids(a + "\n" + a + "\n", 2), 1);  // two namespaces of one host
  EXPECT_EQ(*count_boot_ids(a + "\n" + b + "\n", 2), 2);  // two computers
  EXPECT_EQ(*count_boot_ids(a + "\n" + b + "\n" + a + "\n" + b + "\n", 4), 2);
  // Blank lines, blanks around a line, no final newline and upper case do not matter.
  std::string upper = a;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(*count_boot_ids("\n  " + a + " \r\n\n" + upper, 2), 1);
  EXPECT_EQ(*count_boot_ids(a, 1), 1);
}

// KillWait from `scontrol show config` (Slurm 22.05's layout), and what is not one.
TEST(NodeMachinesTest, ReadsSlurmsKillWait) {
  EXPECT_EQ(parse_kill_wait("Configuration data as of 2026-11-30T06:34:28\n"
                            "JobAcctGatherType       = (null)\n"
                            "KeepAliveTime           = NONE\n"
                            "KillOnBadExit           = 0\n"
                            "KillWait                = 30 sec\n"
                            "MessageTimeout          = 10 sec\n"),
            30);
  EXPECT_EQ(parse_kill_wait("KillWait=2 sec"), 2);
  EXPECT_EQ(parse_kill_wait("KillWait = 0"), 0);
  EXPECT_EQ(parse_kill_wait("KillOnBadExit = 1\nMessageTimeout = 10 sec\n"), std::nullopt);
  EXPECT_EQ(parse_kill_wait("KillWait = soon"), std::nullopt);
  EXPECT_EQ(parse_kill_wait("KillWait = -4 sec"), std::nullopt);
  EXPECT_EQ(parse_kill_wait(""), std::nullopt);
}

TEST(NodeMachinesTest, RejectsWhatIsNotOneBootIdPerNode) {
  const std::string a(kA), b(kB);
  for (const std::string& out : {std::string(), a + "\n", a + "\n" + b + "\n" + b + "\n",
                                 a + "\nsrun: error: n2: task 1: Exited with exit code 1\n",
                                 a + "\n" + a.substr(0, 35) + "\n", a + "\n" + a + "x\n",
                                 a + "\n" + std::string(a).replace(8, 1, "0") + "\n",
                                 a + "\n" + std::string(a).replace(0, 1, "g") + "\n"}) {
    auto n = count_boot_ids(out, 2);
    ASSERT_FALSE(n.ok()) << out;
    EXPECT_EQ(n.error().kind(), ErrorKind::kInvalidInput) << out;
  }
}

// Sets an environment variable for one test and puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A directory holding an executable `srun` that runs `body` (sh) after writing its arguments
// to `args`, one per line.
struct FakeSrun {
  TempDir dir;
  std::string args() const {
    std::ifstream in(dir.path() + "/args");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};
FakeSrun fake_srun(const std::string& body) {
  auto dir = TempDir::create_in_tmp("dltune-test-");
  EXPECT_TRUE(dir.ok());
  const std::string path = dir->path() + "/srun";
  std::ofstream(path) << "#!/bin/sh\nprintf '%s\\n' \"$@\" > '" << dir->path() << "/args'\n"
                      << body << "\n";
  chmod(path.c_str(), 0755);
  return FakeSrun{std::move(*dir)};
}

TEST(NodeMachinesTest, AsksOneTaskPerNodeForItsBootId) {
  FakeSrun srun = fake_srun(std::string("printf '") + kA + "\\n" + kA + "\\n'");
  ScopedEnv path("PATH", srun.dir.path() + ":/usr/bin:/bin");
  ScopedEnv job("SLURM_JOB_ID", "42");
  auto n = count_node_machines(2);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(srun.args(),
            "--nodes=2\n--ntasks=2\n--ntasks-per-node=1\n--quiet\n--input=none\ncat\n"
            "/proc/sys/kernel/random/boot_id\n");
}

TEST(NodeMachinesTest, FailuresAreErrorsNeverHangs) {
  {  // one node is its own machine: nothing runs, in an allocation or not
    FakeSrun srun = fake_srun("exit 1");
    ScopedEnv path("PATH", srun.dir.path() + ":/usr/bin:/bin");
    EXPECT_EQ(*count_node_machines(1), 1);
    EXPECT_EQ(srun.args(), "");
  }
  {
    ScopedEnv job("SLURM_JOB_ID", "");
    EXPECT_EQ(count_node_machines(2).error().kind(), ErrorKind::kUnsupported);
  }
  ScopedEnv job("SLURM_JOB_ID", "42");
  {
    FakeSrun srun = fake_srun("echo 'srun: error: no nodes' >&2; exit 1");
    ScopedEnv path("PATH", srun.dir.path() + ":/usr/bin:/bin");
    EXPECT_EQ(count_node_machines(2).error().kind(), ErrorKind::kIo);
  }
  {
    FakeSrun srun = fake_srun(std::string("echo ") + kA);  // one node answered
    ScopedEnv path("PATH", srun.dir.path() + ":/usr/bin:/bin");
    EXPECT_EQ(count_node_machines(2).error().kind(), ErrorKind::kInvalidInput);
  }
  // A step that waits for CPUs another step holds; one that closed its output but hangs.
  for (const char* body : {"exec sleep 30", "exec sleep 30 >&-"}) {
    FakeSrun srun = fake_srun(body);
    ScopedEnv path("PATH", srun.dir.path() + ":/usr/bin:/bin");
    const auto t0 = std::chrono::steady_clock::now();
    auto n = count_node_machines(2, 300);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_FALSE(n.ok()) << body;
    EXPECT_EQ(n.error().kind(), ErrorKind::kTimeout) << body;
    EXPECT_NE(n.error().message().find("did not finish within 300 ms"), std::string::npos)
        << n.error().message();
    EXPECT_LT(s, 5.0) << body;
  }
}

// A site without job expansion answers salloc's expand request at once; the message says
// what the site would set (seen by hand on the namespace cluster with the parameter removed).
TEST(NodeMachinesTest, AnExpansionRefusedNamesTheSitesParameter) {
  EXPECT_NE(grow_refusal_hint("salloc --dependency=expand:12: salloc: error: Job submit/allocate "
                              "failed: Requested operation not supported on this system")
                .find("SchedulerParameters=permit_job_expansion"),
            std::string::npos);
  EXPECT_EQ(grow_refusal_hint("salloc: error: Unable to allocate resources: Requested node "
                              "configuration is not available"),
            "");
}

}  // namespace
}  // namespace dltune::launcher
