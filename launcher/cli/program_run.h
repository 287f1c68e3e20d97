// One run of a user's program as `dltune launch` starts it for a program recipe (issue 39):
// a trial of a candidate, or the final run with the plan. Each run is a `dltune run` child (its
// own embedded PMIx server, its ranks supervised as any `dltune run` job's), started in the
// recipe's directory with the candidate's values in the command and environment, every rank's
// output written to OUT_DIR/1/rank.N/{stdout,stderr} (and passed through to the terminal for
// the final run), and the program's throughput read back from rank 0's output or the metrics
// file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "recipes/program.h"
#include "tuner/program_tuning.h"

namespace dltune::cli {

struct ProgramRun {
  const recipes::ProgramRecipe* recipe = nullptr;
  recipes::ProgramValues values;  // steps set: {steps}
  std::string binding = "auto";   // --bind: none | core | numa | auto
  // The job's hosts (`dltune run -H`, values.ranks_per_node on each); empty: this machine.
  std::vector<std::string> hosts;
  int slurm_nodes = 0;  // > 0: under Slurm on this many nodes (`--backend slurm --nodes N`)
  std::vector<std::string> run_options;  // the user's -x / --map-by for `dltune run`, last
  std::string plan_file;  // "" none: `dltune run --plan` (collective rules, the values)
  std::string out_dir;    // absolute: the ranks' output files, outcome.json, metrics.jsonl
  // The final run: the ranks' output also to the terminal, and `dltune run`'s own messages
  // there; else (a trial) those go to OUT_DIR/dltune-run.log.
  bool pass_through = false;
  bool tag_output = false, timestamp_output = false;
  double timeout_s = 0;      // > 0: stopped and failed after this long (--timeout)
  int64_t trial_steps = 0;   // DLTUNE_TRIAL_STEPS (0: not set)
  double trial_seconds = 0;  // DLTUNE_TRIAL_SECONDS (0: not set)
};

struct ProgramRunResult {
  int exit_code = 0;  // `dltune run`'s: mpirun's codes, 130 / 143 interrupted
  bool interrupted = false;
  std::string message;           // the launcher's sentence for a failure ("" on success)
  double wall_s = 0;             // start to end
  double samples_per_s = 0;      // 0 when the output held no throughput
  std::string throughput_error;  // why there is none ("printed no line matching ...")
  std::string output_tail;       // the last lines of the failed (else first) rank's output
};

// The `dltune run` command of `run` (argv[0] this dltune), up to and including the program's
// expanded command. Errors: a placeholder that cannot be expanded, no dltune binary.
Result<std::vector<std::string>> program_run_argv(const ProgramRun& run);

// Runs it and waits. Errors: as program_run_argv(), and the run's directory that cannot be
// created; a program that fails is a result (exit_code, message, output_tail), not an error.
Result<ProgramRunResult> run_program(const ProgramRun& run);

// A result as the tuner's trial record: failed (with the reason and tail) when it exited
// non-zero or reported no throughput; a failure that came after `timeout_s` (> 0) is said to
// have run past program.trial_timeout.
tuner::ProgramTrialResult trial_result(const ProgramRunResult& r, double timeout_s = 0);

// The last `lines` lines of `text` (each line at most 200 bytes, printable).
std::string last_lines(const std::string& text, size_t lines);

}  // namespace dltune::cli
