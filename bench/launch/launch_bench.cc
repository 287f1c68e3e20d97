// bench/launch: the wall time of launching and wiring up ranks with `dltune run` against
// `mpirun`, for the same Open MPI program (MPI_Init + MPI_Allreduce + MPI_Finalize), and for
// a PMIx-only program (put / commit / fence / get of every peer) with `dltune run`.
//
//   launch_bench [--repeats N]     (default 9)
//
// Candidates run interleaved, the order rotating every round, because this machine's noise
// comes in phases (performance-facts.md); each figure is the median over the rounds. Output:
// a table, then `summary: mpi2_vs_mpirun=R mpi8_vs_mpirun=R pmix8_ms=T` with R = dltune time /
// mpirun time. Needs the build's bin/ (dltune, mpi_probe, pmix_probe) and mpirun on PATH.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

struct Candidate {
  std::string name;
  std::vector<std::string> argv;
  std::vector<double> ms;
};

// Runs argv with output discarded; returns wall milliseconds, or -1 when it failed.
double time_run(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) return -1;
  posix_spawn_file_actions_destroy(&fa);
  int st = 0;
  waitpid(pid, &st, 0);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? ms : -1;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string bin_dir(const char* argv0) {
  char buf[4096] = {};
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string self = n > 0 ? std::string(buf, static_cast<size_t>(n)) : argv0;
  return self.substr(0, self.rfind('/'));
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 9;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: launch_bench [--repeats N]\n");
      return 2;
    }
  }
  if (repeats < 1) {
    std::fprintf(stderr, "launch_bench: --repeats must be at least 1\n");
    return 2;
  }
  const std::string bin = bin_dir(argv[0]);
  const std::string dltune = bin + "/dltune", mpi = bin + "/mpi_probe", pmix = bin + "/pmix_probe";
  for (const auto& p : {dltune, mpi, pmix}) {
    if (access(p.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "launch_bench: %s is missing; build dltune, mpi_probe and pmix_probe\n",
                   p.c_str());
      return 2;
    }
  }
  // Same Open MPI settings for both launchers: pml ob1 (dltune sets it for its ranks).
  std::vector<std::string> mpirun = {"mpirun", "--oversubscribe", "--mca", "pml", "ob1"};
  if (geteuid() == 0) mpirun.push_back("--allow-run-as-root");
  auto with_np = [&](int n) {
    auto a = mpirun;
    a.insert(a.end(), {"-np", std::to_string(n), mpi, std::to_string(n)});
    return a;
  };
  std::vector<Candidate> c = {
      {"dltune mpi 2", {dltune, "run", "-n", "2", "--", mpi, "2"}, {}},
      {"mpirun mpi 2", with_np(2), {}},
      {"dltune mpi 8", {dltune, "run", "-n", "8", "--", mpi, "8"}, {}},
      {"mpirun mpi 8", with_np(8), {}},
      {"dltune pmix 2", {dltune, "run", "-n", "2", "--", pmix}, {}},
      {"dltune pmix 8", {dltune, "run", "-n", "8", "--", pmix}, {}},
  };
  for (auto& cand : c) {  // warm-up: page cache, and a check that each one works
    if (time_run(cand.argv) < 0) {
      std::fprintf(stderr, "launch_bench: '%s' failed\n", cand.name.c_str());
      return 1;
    }
  }
  for (int r = 0; r < repeats; ++r) {
    for (size_t k = 0; k < c.size(); ++k) {
      Candidate& cand = c[(k + static_cast<size_t>(r)) % c.size()];
      const double ms = time_run(cand.argv);
      if (ms >= 0) cand.ms.push_back(ms);
    }
  }
  std::printf("%-16s %8s %8s %8s %5s\n", "launch", "median", "p10", "p90", "runs");
  for (const auto& cand : c) {
    std::printf("%-16s %6.1fms %6.1fms %6.1fms %5zu\n", cand.name.c_str(), percentile(cand.ms, 0.5),
                percentile(cand.ms, 0.1), percentile(cand.ms, 0.9), cand.ms.size());
  }
  const double r2 = percentile(c[0].ms, 0.5) / percentile(c[1].ms, 0.5);
  const double r8 = percentile(c[2].ms, 0.5) / percentile(c[3].ms, 0.5);
  std::printf("goals: mpi ratio <= 1.0, pmix8 < 150 ms (figures are noisy on a shared machine)\n");
  std::printf("summary: mpi2_vs_mpirun=%.2f mpi8_vs_mpirun=%.2f pmix8_ms=%.1f\n", r2, r8,
              percentile(c[5].ms, 0.5));
  return 0;
}
