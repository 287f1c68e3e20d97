// Starting the rank programs that live next to the dltune binary (dltune-bench-rank,
// dltune-tune-rank, dltune-worker): where they are, how to start local ranks of them, and
// running a command to completion. Shared by `dltune bench` and `dltune tune`.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace dltune::cli {

// The path of `name` in the directory of the running dltune binary. not_found (exit 2) with
// "build the '<name>' target" when it is missing or not executable.
Result<std::string> sibling_program(const std::string& name);
// True when `program` is an executable file in a directory of $PATH.
bool on_path(const std::string& program);
// Runs argv (argv[0] looked up on PATH) to completion with inherited stdio; returns its exit
// code, 128 + the signal when killed, 127 when it could not be started (the reason is printed
// as "dltune <command>: cannot run ..."). The child runs in its own process group; SIGINT and
// SIGTERM sent to this process while it waits are forwarded to it once each (so a terminal's
// Ctrl-C reaches it exactly once). Should this process die without forwarding (SIGKILL), the
// child gets SIGTERM (PR_SET_PDEATHSIG), so that it stops its ranks instead of running on.
// With `cwd`, the child starts in that directory; with `output`, its standard output and error
// go to that file (appended, created 0600) instead (127 when either cannot be done). Errors only
// when fork or waitpid fail.
Result<int> run_to_completion(const std::vector<std::string>& argv, const std::string& command,
                              const std::string& cwd = "", const std::string& output = "");
// The last signal (SIGINT or SIGTERM) run_to_completion forwarded to a child, 0 when none: a
// caller that sees it cleans up and exits 128 + it (130 / 143) rather than reporting the
// child's failure.
int forwarded_signal();
// The Open MPI launch prefix for `ranks` local ranks (root allowed, oversubscription allowed,
// pml ob1 to skip Open MPI's ~200 ms probe of the cm layer).
std::vector<std::string> mpirun_prefix(int ranks);
// `<dltune> run -n RANKS --`: this binary's own launcher (its PMIx server starts and
// supervises the ranks). Errors: as sibling_program("dltune").
Result<std::vector<std::string>> dltune_run_prefix(int ranks);
// The prefix that starts `ranks` local ranks of an MPI rank program: dltune_run_prefix() where
// the build has PMIx and MPI; otherwise mpirun_prefix() when mpirun is on PATH; otherwise empty
// (no launcher: the caller runs its ranks as threads). Errors: as dltune_run_prefix().
Result<std::vector<std::string>> local_rank_launcher(int ranks);
// local_rank_launcher(ranks); where that is empty, says so on stderr ("dltune COMMAND: ...")
// and appends `--threads RANKS` to the rank program's `args` (it then runs its ranks as
// threads of one process).
Result<std::vector<std::string>> local_rank_launcher_or_threads(const std::string& command,
                                                                int ranks,
                                                                std::vector<std::string>* args);

}  // namespace dltune::cli
