// The slurm launch backend: `srun --mpi=pmix --kill-on-bad-exit` inside an allocation, so
// that Slurm's PMIx plugin is every rank's server and the ranks span the allocation's nodes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "launcher/launch_spec.h"

namespace dltune::launcher {

// The srun command line for `spec` (srun resolved to `srun_path`), without the environment.
std::vector<std::string> srun_command(const std::string& srun_path, const LaunchSpec& spec);

// One task-status line srun prints when a task ends badly, e.g.
//   "srun: error: n1: task 2: Exited with exit code 3"
//   "srun: error: n2: tasks 0,2-3: Killed"
struct SrunTaskFailure {
  std::string host;
  int rank = -1;       // the first task named on the line
  int exit_code = -1;  // when "Exited with exit code C"
  std::string signal;  // "Killed", "Terminated", ... otherwise
  // "rank 2 on n1 exited with code 3" / "rank 0 on n2 was killed (Killed)".
  std::string describe() const;
};
// Parses such a line; nullopt for any other line.
std::optional<SrunTaskFailure> parse_srun_failure(std::string_view line);

// The task that failed first, from all of srun's task-status lines of a run: srun's own
// --kill-on-bad-exit kill shows as "Terminated", so a task killed by another signal
// ("Killed", "Segmentation fault") is the cause; else the first task that exited with a
// non-zero code; else the first line. A task killed by a signal is reported late (after
// its peers saw it vanish and exited), which is why order alone is not enough.
std::optional<SrunTaskFailure> first_failure(const std::vector<SrunTaskFailure>& lines);

// Runs spec.nranks ranks with srun (see launcher/supervisor.h for the policy; srun gets
// SIGTERM for the launcher's SIGINT). The plan blob, when given, is written to a private file
// named in DLTUNE_PLAN for the ranks (the directory must be visible on every node: it is
// $TMPDIR, so on a real cluster point TMPDIR at a shared file system).
// Success: the outcome; a failed task is named from srun's task-status line.
// Failure: kInvalidInput / kNotFound for a bad spec, kUnsupported when srun is not installed.
Result<LaunchOutcome> run_slurm(const LaunchSpec& spec);

}  // namespace dltune::launcher
