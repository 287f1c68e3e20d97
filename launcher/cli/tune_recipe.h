// `dltune tune RECIPE`: tunes a recipe's training configuration (batch, scaling, bucket size,
// overlap; tuner/recipe_tuning.h) for this machine and job shape, stores the Plan in the user
// tuning database and prints it.
//
// Flow: load the recipe (bad recipe: exit 2 with its file:line:col problems); the key is
// (topology fingerprint, versions, 1 node x RANKS, recipe signature); an exact hit prints the
// cached plan and exits 0 unless --retune; else the base plan's collectives come from the
// cached collective plan for this shape (key with recipe signature ""), else a default plan;
// the trials run once as `mpirun -np RANKS dltune-worker trial ...`; the plan is stored under
// the key together with every trial (db::RecipeTrial), in one transaction.
#pragma once

#include <string>
#include <vector>

#include "tuner/recipe_tuning.h"

namespace dltune::cli {

struct TuneRecipeOptions {
  std::string recipe;   // path or bundled name
  int ranks = 0;        // 0 = the recipe's launch.ranks, else 2
  double budget_s = 0;  // 0 = the recipe's tune.budget
  std::string db;       // "" = DLTUNE_DB / XDG default
  bool retune = false;  // measure even on a cache hit
  bool grid = false;    // measure the full grid (the benchmark's reference)
  bool json = false;    // {cached, db, outcome, plan}
};

// Runs the command; returns the exit code (0, 1 the ranks failed, 2 bad input).
int run_tune_recipe(const TuneRecipeOptions& o);

// A RunRanks that starts `ranks` local ranks of dltune-worker (next to the dltune binary) with
// local_rank_launcher() (`dltune run`, or mpirun) and waits for them. Error (unsupported) when
// there is no launcher; peer_failed naming the exit code when the ranks fail.
tuner::RunRanks local_worker_ranks(int ranks);

}  // namespace dltune::cli
