// Supervisor with real child processes (sh): exit codes, signals, output, stopping.
#include "launcher/backend/supervisor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

extern char** environ;

namespace dltune::launcher {
namespace {

ChildSpec sh(const std::string& script, int index) {
  return {"/bin/sh", {"sh", "-c", script}, environ, {}, "rank " + std::to_string(index), "h"};
}

TEST(SupervisorTest, AllZeroIsSuccess) {
  Supervisor sup({});
  ASSERT_TRUE(sup.install_signal_handling().ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sup.spawn(sh("exit 0", i)).ok());
  LaunchOutcome out = sup.run();
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_EQ(out.message, "");
}

TEST(SupervisorTest, FirstFailureStopsTheOthers) {
  Supervisor sup({false, 300, 0});
  ASSERT_TRUE(sup.install_signal_handling().ok());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(sup.spawn(sh("sleep 30", 0)).ok());
  ASSERT_TRUE(sup.spawn(sh("sleep 0.1; exit 3", 1)).ok());
  // Ignores SIGTERM: needs the SIGKILL after the grace period.
  ASSERT_TRUE(sup.spawn(sh("trap '' TERM; sleep 30", 2)).ok());
  LaunchOutcome out = sup.run();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(out.exit_code, 3);  // the failed rank's code, as mpirun gives it
  EXPECT_EQ(out.message, "rank 1 on h exited with code 3");
  EXPECT_LT(secs, 5.0);
}

TEST(SupervisorTest, NamesTheSignal) {
  Supervisor sup({});
  ASSERT_TRUE(sup.install_signal_handling().ok());
  ASSERT_TRUE(sup.spawn(sh("kill -9 $$", 0)).ok());
  LaunchOutcome out = sup.run();
  EXPECT_EQ(out.exit_code, 128 + 9);
  EXPECT_NE(out.message.find("rank 0 on h was killed by signal 9"), std::string::npos);
}

TEST(SupervisorTest, TimeoutNamesARunningRank) {
  Supervisor sup({false, 200, 0.3});
  ASSERT_TRUE(sup.install_signal_handling().ok());
  ASSERT_TRUE(sup.spawn(sh("exit 0", 0)).ok());
  ASSERT_TRUE(sup.spawn(sh("sleep 30", 1)).ok());
  LaunchOutcome out = sup.run();
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_NE(out.message.find("rank 1 on h was still running"), std::string::npos) << out.message;
}

// A judge may fail an exit with code 0 (a rank that skipped PMIx_Finalize): there is no code to
// pass on, so the launch fails with 1. A watched event's failure carries its own code.
TEST(SupervisorTest, FailuresWithoutACodeExitOne) {
  Supervisor sup({});
  ASSERT_TRUE(sup.install_signal_handling().ok());
  sup.set_exit_judge([](int, int) { return std::string("rank 0 left without a word"); });
  ASSERT_TRUE(sup.spawn(sh("exit 0", 0)).ok());
  LaunchOutcome out = sup.run();
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_EQ(out.message, "rank 0 left without a word");
  EXPECT_EQ(Supervisor::exit_code_for(0), 1);
  EXPECT_EQ(Supervisor::exit_code_for(5 << 8), 5);
  EXPECT_EQ(Supervisor::exit_code_for(SIGSEGV), 128 + SIGSEGV);

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  Supervisor watched({false, 300, 0});
  ASSERT_TRUE(watched.install_signal_handling().ok());
  watched.watch(fds[0], [] { return Failure{"rank 1 called MPI_Abort", 7}; });
  ASSERT_TRUE(watched.spawn(sh("sleep 30", 0)).ok());
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  out = watched.run();
  EXPECT_EQ(out.exit_code, 7);
  EXPECT_EQ(out.message, "rank 1 called MPI_Abort");
  close(fds[0]);
  close(fds[1]);
}

// The launcher's standard input reaches the one child that asked for it; the others read an
// empty input.
// This process's standard input read from a file holding `text` while it lives.
class StdinFrom {
 public:
  explicit StdinFrom(const std::string& text) {
    char path[] = "/tmp/dltune-stdin-XXXXXX";
    const int fd = mkstemp(path);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    lseek(fd, 0, SEEK_SET);
    saved_ = dup(0);
    dup2(fd, 0);
    close(fd);
    unlink(path);
  }
  ~StdinFrom() {
    dup2(saved_, 0);
    close(saved_);
  }
  StdinFrom(const StdinFrom&) = delete;
  StdinFrom& operator=(const StdinFrom&) = delete;

 private:
  int saved_ = -1;
};

TEST(SupervisorTest, StandardInputReachesOneChild) {
  std::string big(200000, 'x');  // more than a pipe holds: the forwarding must wait for room
  big += "\nend\n";
  StdinFrom input(big);
  Supervisor sup({});
  ASSERT_TRUE(sup.install_signal_handling().ok());
  std::vector<std::string> seen;
  sup.set_line_filter([&seen](int index, bool, std::string_view line) {
    seen.push_back(std::to_string(index) + ":" + std::string(line));
    return std::nullopt;
  });
  ChildSpec reader = sh("wc -c", 0);
  reader.stdin_from_launcher = true;
  ASSERT_TRUE(sup.spawn(reader).ok());
  ASSERT_TRUE(sup.spawn(sh("wc -c", 1)).ok());
  EXPECT_EQ(sup.run().exit_code, 0);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"0:" + std::to_string(big.size()), "1:0"}));
}

// A child's stdin_prefix comes first: before the launcher's input for the child that reads
// it, and alone (then the end of input) for the others; `read` takes the first line only.
TEST(SupervisorTest, StandardInputPrefixComesFirst) {
  StdinFrom input("user line\n");
  Supervisor sup({});
  ASSERT_TRUE(sup.install_signal_handling().ok());
  std::vector<std::string> seen;
  sup.set_line_filter([&seen](int index, bool, std::string_view line) {
    seen.push_back(std::to_string(index) + ":" + std::string(line));
    return std::nullopt;
  });
  const std::string script = "IFS= read -r s; echo \"[$s] $(cat)\"";
  ChildSpec reader = sh(script, 0);
  reader.stdin_from_launcher = true;
  reader.stdin_prefix = "secret 0\n";
  ASSERT_TRUE(sup.spawn(reader).ok());
  ChildSpec other = sh(script, 1);
  other.stdin_prefix = "secret 1\n";
  ASSERT_TRUE(sup.spawn(other).ok());
  ASSERT_TRUE(sup.spawn(sh(script, 2)).ok());
  EXPECT_EQ(sup.run().exit_code, 0);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"0:[secret 0] user line", "1:[secret 1] ", "2:[] "}));
}

TEST(SupervisorTest, FiltersOutputLines) {
  Supervisor sup({});
  ASSERT_TRUE(sup.install_signal_handling().ok());
  std::vector<std::string> seen;
  sup.set_line_filter([&seen](int index, bool is_stderr, std::string_view line) {
    seen.push_back(std::to_string(index) + (is_stderr ? "e:" : "o:") + std::string(line));
    return std::nullopt;
  });
  ASSERT_TRUE(sup.spawn(sh("printf 'a\\nb'; echo c >&2", 0)).ok());
  EXPECT_EQ(sup.run().exit_code, 0);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"0e:c", "0o:a", "0o:b"}));
}

// srun's task-status line says the step failed; a child that then does not end by itself
// (srun waiting for a node that is gone, ignoring SIGTERM) is stopped after the grace, the
// launch failing with the caller's failure. One that ends within it keeps its own verdict.
TEST(SupervisorTest, StopsAChildThatOverstaysItsFailure) {
  for (const bool ends_in_time : {false, true}) {
    Supervisor sup({false, 200, 0});
    ASSERT_TRUE(sup.install_signal_handling().ok());
    sup.set_line_filter([&sup](int, bool, std::string_view line) {
      if (line == "task 0 failed") {
        sup.stop_unless_ended(std::chrono::milliseconds(300), {"the step overstayed", 7});
      }
      return std::optional<std::string>(line);
    });
    const auto start = std::chrono::steady_clock::now();
    const std::string after = ends_in_time ? "sleep 0.1; exit 2" : "sleep 30";
    ASSERT_TRUE(sup.spawn(sh("trap '' TERM; echo 'task 0 failed'; " + after, 0)).ok());
    LaunchOutcome out = sup.run();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (ends_in_time) {
      EXPECT_EQ(out.exit_code, 2);
      EXPECT_EQ(out.message, "rank 0 on h exited with code 2");
    } else {
      EXPECT_EQ(out.exit_code, 7);
      EXPECT_EQ(out.message, "the step overstayed");
      EXPECT_GE(secs, 0.3);
      EXPECT_LT(secs, 5.0);  // 0.3 s, then SIGKILL 0.2 s after the ignored SIGTERM
    }
  }
}

// A rank killed while it made a node-shared segment (before its peers mapped and unlinked it)
// leaves it in /dev/shm: the supervisor removes its segments when it reaps it; another
// process's stay.
TEST(SupervisorTest, RemovesTheSegmentsOfARankThatDied) {
  const std::string pid_file = "/tmp/dltune-supervisor-test-" + std::to_string(getpid());
  const std::string mine = "/dev/shm/dltune-" + std::to_string(getpid()) + "-77";
  std::ofstream(mine) << "x";
  Supervisor sup({});
  ASSERT_TRUE(sup.install_signal_handling().ok());
  ASSERT_TRUE(sup.spawn(sh("echo $$ > " + pid_file +
                               "; echo x > /dev/shm/dltune-$$-3; echo x > /dev/shm/dltune-$$-4;"
                               " kill -9 $$",
                           0))
                  .ok());
  LaunchOutcome out = sup.run();
  EXPECT_EQ(out.exit_code, 128 + 9);
  std::string pid;
  std::ifstream(pid_file) >> pid;
  ASSERT_FALSE(pid.empty());
  EXPECT_NE(access(("/dev/shm/dltune-" + pid + "-3").c_str(), F_OK), 0);
  EXPECT_NE(access(("/dev/shm/dltune-" + pid + "-4").c_str(), F_OK), 0);
  EXPECT_EQ(access(mine.c_str(), F_OK), 0);  // this live process's stays
  unlink(mine.c_str());
  unlink(pid_file.c_str());
}

// True when a process whose command line contains `needle` exists.
bool process_exists(const std::string& needle) {
  DIR* d = opendir("/proc");
  bool found = false;
  while (dirent* e = d != nullptr ? readdir(d) : nullptr) {
    std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), {});
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (std::atoi(e->d_name) > 0 && cmd.find(needle) != std::string::npos) found = true;
  }
  if (d != nullptr) closedir(d);
  return found;
}

TEST(SupervisorTest, WhatARankLeavesBehindDiesWithIt) {
  Supervisor sup({});
  ASSERT_TRUE(sup.install_signal_handling().ok());
  const std::string token = "31." + std::to_string(getpid());
  ASSERT_TRUE(sup.spawn(sh("sleep " + token + " & exit 0", 0)).ok());
  EXPECT_EQ(sup.run().exit_code, 0);
  for (int i = 0; i < 100 && process_exists("sleep " + token); ++i) usleep(10'000);
  EXPECT_FALSE(process_exists("sleep " + token));
}

TEST(SupervisorTest, ForwardsSigtermAndReports143) {
  Supervisor sup({false, 300, 0});
  ASSERT_TRUE(sup.install_signal_handling().ok());
  ASSERT_TRUE(sup.spawn(sh("sleep 30", 0)).ok());
  ASSERT_TRUE(sup.spawn(sh("sleep 30", 1)).ok());
  kill(getpid(), SIGTERM);  // blocked and routed to the signalfd: run() sees it
  LaunchOutcome out = sup.run();
  EXPECT_EQ(out.exit_code, 143);
  EXPECT_NE(out.message.find("SIGTERM"), std::string::npos);
}

}  // namespace
}  // namespace dltune::launcher
