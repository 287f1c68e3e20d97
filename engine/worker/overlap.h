// `dltune-worker overlap`: how this machine's computation and communication slow each other
// while both run (issue 41 item 4), measured with the engine's own training step and the
// communication library's allreduce, for `dltune predict --interference measure`
// (planning/overlap.h's model).
//
//   dltune run -n G -- dltune-worker overlap (--model NAME | --recipe RECIPE) [--batch B]
//                      [--threads T] [--sizes BYTES,...] [--rounds R] [--out FILE]
//
// Every rank trains the model alone (no communicator: the compute of one rank, T threads) and
// shares one world communicator for allreduces of each size (in the node-shared buffer with
// the shm algorithm on one node, as the engine's gradients; a ring across nodes). Per size and
// round, interleaved so that a slow phase of the machine touches all three alike:
//   alone:    one training step (c0 seconds); n allreduces back to back (n x m0), n chosen once
//             per size so that they last about a step (the ranks agree on the largest n);
//   together: the n allreduces on a second thread while the step runs (Tc and Tm seconds).
// The slowdowns follow from the model's own rates (planning::slowdowns_from_timings): when the
// allreduces end first (Tm <= Tc), they ran slowed throughout, comm = Tm / (n m0) - 1, and
// compute ran slowed for Tm seconds and alone for the rest: x = (Tc - c0) / Tm, compute =
// x / (1 - x); the other way round when the step ends first. Each round's figures are the
// ranks' mean (a step waits for all of them); each size reports the median over rounds.
//
// Rank 0 writes JSON: {"model", "batch", "threads", "ranks", "rounds", "algorithm", "sizes":
// [{"bytes", "compute_slowdown", "comm_slowdown", "compute_slowdown_range": [min, max] over the
// rounds, "comm_slowdown_range", "step_alone_s", "allreduce_alone_s", "calls"}]}.
// Exit: 0; 2 for bad input (fewer than 2 ranks, an unknown model, a size < 4 bytes); 1 when a
// step or an allreduce fails.
#pragma once

namespace CLI {
class App;
}

namespace dltune::engine {

// Adds the `overlap` subcommand to `app`; returns it (check ->parsed() after parsing).
CLI::App* add_overlap_command(CLI::App& app);
// Runs the parsed `overlap` subcommand; returns the process exit code.
int run_overlap_command();

}  // namespace dltune::engine
