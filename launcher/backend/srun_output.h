// What srun prints about a job's tasks, read by the slurm backend (slurm_backend.cc): the
// failures it reports, Open MPI's MPI_Abort banner, and the lines to pass on to the user.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/backend/plan_env.h"
#include "launcher/backend/slurm_backend.h"

namespace dltune::launcher {

// What srun's stderr said about the failed tasks: its task-status lines, and Open MPI's
// MPI_Abort banner, which names the rank that aborted (srun's status lines only list the tasks
// it killed afterwards): "rank N called MPI_Abort (error code E)" and E.
struct SrunFailures {
  std::vector<SrunTaskFailure> tasks;
  std::optional<std::pair<std::string, int>> aborted;
};

// The supervisor's line filter for srun: records the failures in `w`, drops srun's task-status
// lines and teardown noise (logged at debug) (nullopt), and returns the rest as it is.
std::optional<std::string> filter_srun_line(SrunFailures& w, bool is_stderr, std::string_view line);

// A line of srun --label's output split into its task and text: "  3: text" -> {3, "text"};
// {-1, line} for a line with no label (srun's own).
std::pair<int, std::string_view> split_srun_label(std::string_view line);

// A failed job's message, exit code and host from what srun said: the rank that called
// MPI_Abort (on its node), else the first failed task in place of srun's own exit.
void name_failure(LaunchOutcome& out, const SrunFailures& w, const PlanEnv& pe);

}  // namespace dltune::launcher
