// What to launch and how it ended: the types every launch backend (local, slurm) shares.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "launcher/backend/rank_output.h"
#include "recipes/plan.h"
#include "topology/topology.h"

namespace dltune::launcher {

enum class Backend { kLocal, kSlurm };

// Parses "local" or "slurm". Failure: kInvalidInput.
Result<Backend> parse_backend(const std::string& text);
// The default backend: DLTUNE_BACKEND when set, else slurm when SLURM_JOB_ID is set, else local.
// Failure: kInvalidInput when DLTUNE_BACKEND holds an unknown name.
Result<Backend> default_backend();

struct LaunchSpec {
  int nranks = 1;
  int nodes = 0;                  // slurm: the nodes to spread the ranks over (0 = srun's choice)
  std::vector<std::string> argv;  // argv[0] is the program as the user wrote it
  topology::BindPolicy bind = topology::BindPolicy::kAuto;  // --bind
  bool bind_from_user = false;  // --bind / DLTUNE_BIND given: the plan's placement yields to it
  // --map-by (local ranks): how they are dealt over the NUMA domains; given, the plan's
  // placement yields to it too.
  topology::MapPolicy map = topology::MapPolicy::kBlock;
  bool map_from_user = false;
  // The ranks' output: tagged "[rank] ", timestamped, copied to files (launcher/rank_output.h)
  RankOutputOptions output;
  // The job's plan (`dltune run --plan`), read before anything starts, and its text as every
  // rank gets it (PMIx job data, DLTUNE_PLAN); "" / nullopt = none.
  std::optional<recipes::Plan> plan;
  std::string plan_blob;
  std::string recipe_blob;   // the recipe as run, given to dltune's ranks ("" = none)
  double timeout_s = 0;      // > 0: stop the job and fail after this many seconds
  int kill_grace_ms = 2000;  // SIGTERM -> SIGKILL delay when stopping ranks
  std::vector<std::pair<std::string, std::string>> extra_env;  // added to every rank
  // slurm: each local rank's CPUs (the plan's placement), bound with srun's mask_cpu
  std::vector<std::vector<int>> local_cpus;
  // slurm: nodes of the allocation the job must not use (srun --exclude): a node lost earlier
  std::vector<std::string> exclude;
  // Told what the user should know before the ranks start (ranks sharing cores, a plan that
  // cannot be applied), one sentence each; when unset, it is logged as a warning.
  std::function<void(const std::string&)> warn;
};

// How a launch ended, as mpirun reports it. exit_code: 0 every rank exited 0; the first failed
// rank's exit code, or 128 + the signal that killed it, or the error code it passed to
// MPI_Abort / PMIx_Abort (message names the rank, its host and the cause); 1 for a failure with
// no code of its own (a rank that exited 0 without PMIx_Finalize, the timeout); 130 / 143 the
// launcher was interrupted by SIGINT / SIGTERM (message says so).
struct LaunchOutcome {
  int exit_code = 0;
  std::string message;       // one sentence; "" on success
  bool interrupted = false;  // the launcher got SIGINT / SIGTERM / SIGHUP (not a rank failure)
  std::string host;          // the failed rank's node (slurm backend); "" when not known
};

// The outcome as `dltune run --outcome-file` writes it, for the program that started it
// (`dltune launch` reads why its ranks failed, and whether the user interrupted them, to decide
// on a restart, and on which nodes): {"exit_code": N, "message": "...", "interrupted": bool,
// "host": "..."} ("host" only when known).
std::string outcome_to_json(const LaunchOutcome& o);
// Reads outcome_to_json()'s text back. Errors: invalid_input when it is not that object.
Result<LaunchOutcome> outcome_from_json(std::string_view text);

// Resolves `program` like execvp: a name with a '/' is used as is, else it is looked up in
// PATH. Success: the path of an executable regular file. Failure: kNotFound ("program 'x' was
// not found in PATH") or kInvalidInput (a directory, or not executable).
Result<std::string> find_program(const std::string& program);

// mpirun's `-x NAME=VALUE` (set NAME in every rank) and `-x NAME` (every rank gets this
// command's NAME), as NAME -> VALUE pairs. Errors: invalid_input for a name that is not a
// variable's, or `-x NAME` of a NAME that is not set here.
Result<std::vector<std::pair<std::string, std::string>>> parse_exports(
    const std::vector<std::string>& exports);

// Checks a spec before anything starts. Failure: kInvalidInput for no program, nranks < 1 or
// > 4096, a negative timeout; kNotFound for a program that does not exist.
Status validate_spec(const LaunchSpec& spec);

}  // namespace dltune::launcher
