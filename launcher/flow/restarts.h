// A job that continues by itself after a failure (issue 40, launch.restarts): when its ranks
// fail, the launch starts them again on the same ranks from the run directory's last
// checkpoint, up to launch.restarts times. The checkpoint holds the parameters, the optimizer
// state, the data order and the RNG state, so the restarted job ends with the same parameters
// as one that never failed (as `dltune launch --resume` does); the steps after the checkpoint
// are done again. An interrupt (the user's Ctrl-C or SIGTERM to the launch) is never restarted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "launcher/backend/launch_spec.h"

namespace dltune::launcher {

// One restart, as the summary reports it.
struct Restart {
  double at_s = 0;        // the failed attempt's end, seconds into the launch
  int exit_code = 0;      // the failed attempt's (as mpirun's: the rank's code, 128 + signal)
  std::string why;        // `dltune run`'s sentence naming the rank and the cause ("" unknown)
  int64_t from_step = 0;  // the checkpoint's step the next attempt continued from (0: the start)
  double lost_s = -1;     // from the failure to the next attempt's first step (< 0: no step)
  int ranks = 0;          // the ranks the next attempt ran on
  bool fewer = false;     // fewer than before: the failure was taken as lasting (min_ranks)
  std::string lost_node;  // slurm: the failed rank's node, which no longer answered (left out)
  // slurm: the spare node that ran in lost_node's place ("" none)
  std::string spare_node;
  bool grown = false;  // spare_node was added to the allocation for it (--nodes MIN-MAX)
  int nodes = 0;       // the nodes the next attempt ran on (0: not recorded)
};

// Why the launch must not restart after a failed attempt whose outcome is `o`, having
// restarted `done` times of `allowed`: "" when it restarts; else the reason ("interrupted",
// "launch.restarts is 0", "the 2 restarts of launch.restarts are used up").
std::string restart_refusal(const LaunchOutcome& o, int done, int allowed);

// The restart's "why" for an attempt that ended with `outcome_message`: that message, and where
// a rank gave up waiting for a peer (`run_dir`'s failures/rank-N.txt, the worker's timeout note)
// the lowest such rank's error after it: "rank 0 on vm exited with code 1; rank 0 had timed out:
// allreducing gradients at step 39: ...: rank 1 did not answer in time (...)". A hung rank says
// nothing itself: its peer's timeout is what names it.
std::string failure_why(const std::string& outcome_message, const std::string& run_dir);
// Removes `run_dir`'s failures/ (before each attempt: its notes are then that attempt's).
void clear_failure_notes(const std::string& run_dir);
// Removes what checkpoint writes of killed ranks left in `run_dir`'s checkpoints/ (their
// temporary files, checkpoint.bin.tmp.PID); the checkpoint itself is whole, the rename being the
// only step that replaces it. Call it when no rank of the run is running.
void remove_partial_checkpoints(const std::string& run_dir);

// The step of the checkpoint in `path` (its header only; 0 when there is none or it cannot be
// read: the next attempt then starts from the beginning).
int64_t checkpoint_step(const std::string& path);

// summary.json's "restarts": [{"at_s", "exit_code", "why", "from_step", "lost_s" (null: the
// attempt after it trained no step), "ranks" (the next attempt's), "fewer", and with a node
// lost under Slurm "lost_node" and "nodes" (the next attempt's), and "spare_node" when a spare
// node took its place}].
nlohmann::json restarts_json(const std::vector<Restart>& restarts);

// One restart as a sentence for the summary and the progress display: "at 12.3 s: rank 1 on
// node1 was killed by signal 9 (SIGKILL); continued from the checkpoint at step 30, training
// again 2.1 s after the failure" (", on 1 rank, planned again" when it ran on fewer; ", without
// node n3 (it no longer answered), on 4 ranks on 2 nodes, planned again" after a lost node;
// ", without node n3 (it no longer answered), on spare node n4 in its place" with a spare).
// `r` as restarts_json() writes it.
std::string restart_text(const nlohmann::json& r);

}  // namespace dltune::launcher
