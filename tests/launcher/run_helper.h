// Helpers for the launcher's multi-process tests: run `dltune` as a child with captured
// output and a wall-clock limit, and look for leftover processes and files.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace dltune::testing {

struct RunResult {
  int exit_code = -1;  // -1 when killed by a signal or by the limit
  std::string out;     // stdout
  std::string err;     // stderr
  double seconds = 0;  // wall time
};

struct RunOptions {
  std::vector<std::pair<std::string, std::string>> env;  // added to the environment
  double limit_s = 60;                                   // the child is SIGKILLed after this
  int sigint_after_ms = -1;  // send SIGINT to the child after this delay (-1: never)
  int sigint_count = 1;
  const char* stdin_data = nullptr;  // the child's standard input (nullptr: /dev/null)
};

// <DLTUNE_BINARY_DIR>/bin/<name> (the build's binaries).
std::string binary(const std::string& name);
// Runs argv (argv[0] a path) and waits; see RunOptions.
RunResult run(const std::vector<std::string>& argv, const RunOptions& options = {});
// PIDs of processes whose command line contains `marker`.
std::vector<int> processes_with(const std::string& marker);
// Entries of `dir` whose names start with `prefix`.
std::vector<std::string> entries_with_prefix(const std::string& dir, const std::string& prefix);
// A fresh marker unique to this process and call.
std::string unique_marker();

}  // namespace dltune::testing
