// `dltune-worker trial`: the ranks' side of recipe tuning (the file formats and the search are
// described in tuner/recipe_tuning.h, which writes the candidates and reads the results).
//
//   dltune-worker trial --recipe RECIPE.yaml --candidates C.json --out R.json [--budget S]
//                       [--deadline UNIX_S] [--progress EVENTS.jsonl] [--grid]
//
// Run on every rank of a job (MPI communicator when launched as a rank, else one rank alone).
// The ranks step through the candidates without relaunching: a trainer per candidate from
// engine::train_config_from(recipe, plan with that training and, for a pipeline candidate, its
// "parallel" layout, ranks), warm-up steps, then timed
// steps in interleaved chunks; successive halving on throughput (--grid: every candidate once,
// at the longest trial length), whose decisions are common/halving.h's: the one implementation
// of the search, unit-tested there and shared with the tuner, in common/ because the engine
// may not include tuner/ (DESIGN.md). Every decision uses the slowest rank's step times (allreduce
// max), so all ranks decide alike. A candidate that fails (bad batch, out of memory, a step
// error) on every rank alike is recorded with its reason and the search goes on; a step that
// fails on some ranks only leaves the ranks in different collectives, so the search stops
// within max(5 s, 10 x the slowest step) and the rank exits at once (exit 1) for the launcher
// to stop the others. A candidate whose layout needs more memory per rank than the recipe's
// launch.memory_per_rank (else the node's share, engine::rank_memory_limit) is never built: it
// fails with "does not fit: needs X per rank, over the Y limit". DLTUNE_FAULT_TRIAL_STEP=RANK:N (or
// *:N) injects a failed step for tests. Synthetic training sets are cut to max(4096, 8 x the
// largest global batch) samples, and large samples to 256 MiB beyond two global batches (step time
// does not depend on the set's size; generating it does). Rank 0 writes R.json.
//
// The budget: --deadline (the launcher's clock, so that the ranks' start-up counts) or --budget
// seconds from the start. Building a trainer and its warm-up count too: before each chunk, a
// cost model of the set-ups and steps so far (common/halving_cost.h) says whether it (and the
// trainer's set-up, when it is not built) ends within the budget; a first-round candidate not
// yet measured that does not fit is recorded as skipped ("not measured: the tune.budget ran
// out before its first trial"), otherwise the round ends there. Each trial records its chunks'
// (steps, seconds), so that the tuner can state paired intervals; the round that compares the
// two finalists goes on, a cycle at a time, while their paired ~95 % interval
// (common/stats.h paired_rate_ratio) still holds 1 and the budget allows. Rank 0 appends
// progress events to --progress: trial_start, trial_build, trial_chunk (round,
// candidate, steps, the best so far), trial_skip, trial_compare, trial_round.
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
