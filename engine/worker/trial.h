// `dltune-worker trial`: the ranks' side of recipe tuning (the file formats and the search are
// described in tuner/recipe_tuning.h, which writes the candidates and reads the results).
//
//   dltune-worker trial --recipe RECIPE.yaml --candidates C.json --out R.json [--budget S]
//                       [--grid]
//
// Run on every rank of a job (MPI communicator when launched as a rank, else one rank alone).
// The ranks step through the candidates without relaunching: a trainer per candidate from
// engine::train_config_from(recipe, plan with that training, ranks), warm-up steps, then timed
// steps in interleaved chunks; successive halving on throughput (--grid: every candidate once,
// at the longest trial length), whose decisions are common/halving.h's: the one implementation
// of the search, unit-tested there and shared with the tuner, in common/ because the engine
// may not include tuner/ (DESIGN.md). Every decision uses the slowest rank's step times (allreduce
// max), so all ranks decide alike. A candidate that fails (bad batch, out of memory, a step
// error) on every rank alike is recorded with its reason and the search goes on; a step that
// fails on some ranks only leaves the ranks in different collectives, so the search stops
// within max(5 s, 10 x the slowest step) and the rank exits at once (exit 1) for the launcher
// to stop the others. DLTUNE_FAULT_TRIAL_STEP=RANK:N (or *:N) injects a failed step for tests.
// Synthetic training sets are cut to max(4096, 8 x the largest global batch) samples (step
// time does not depend on the set's size; generating it does). Rank 0 writes R.json.
// Exit: 0 (R.json written, even when every candidate failed), 1 communication failure,
// 2 bad input (unreadable recipe or candidates file).
#pragma once

namespace CLI {
class App;
}

namespace dltune::engine {

// Adds the `trial` subcommand to `app`; returns it (check ->parsed() after parsing).
CLI::App* add_trial_command(CLI::App& app);
// Runs the parsed `trial` subcommand; returns the process exit code.
int run_trial_command();

}  // namespace dltune::engine
