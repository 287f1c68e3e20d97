// Running a short helper program and reading what it prints (srun's boot ids, scontrol's job,
// `dltune run -H`'s hosts): the launcher's one way to do it, with a deadline.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace dltune::launcher {

// Runs argv (argv[0] a path) with no stdin and stderr discarded (`with_stderr`: read with
// stdout, and its last line in the error when it fails); its stdout (the first MiB) when it
// exits 0. With `timeout_ms` > 0 it is stopped after that long (SIGTERM, which makes srun
// cancel its step, then SIGKILL a second later) and the answer is a kTimeout error. Errors:
// kIo when it cannot start or exits non-zero (its status; with_stderr, its last line).
Result<std::string> capture_output(const std::vector<std::string>& argv, int timeout_ms = 0,
                                   bool with_stderr = false);

}  // namespace dltune::launcher
