// Step 3 of `dltune launch` (DESIGN.md "main flow"): the Plan for this recipe on this machine and
// job shape — from the databases when they hold one, else tuned within the recipe's budget
// (collective sweep, then trial trainings) and stored, else the recipe's own settings.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/progress.h"
#include "common/result.h"
#include "launcher/flow/launch_layout.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"
#include "topology/topology.h"
#include "tuner/db/lookup.h"

#include "predict/level_fit.h"

namespace dltune::launcher {

// Runs `argv` (argv[0] an executable path) as every rank of the job and returns when all have
// exited; an error (peer_failed) names the failed rank. `phase` names the step for messages.
using RankRunner =
    std::function<Status(const std::string& phase, const std::vector<std::string>& argv)>;

struct PlanChoice;

struct PlanRequest {
  recipes::Recipe recipe;
  std::string recipe_path;  // the file the ranks re-read for trials
  recipes::JobShape job;
  topology::Topology topo;
  tuner::db::Layers layers;
  bool retune = false;   // measure even when a plan is cached
  bool no_tune = false;  // never measure: the cache, else the recipe's own settings
  // Why no_tune, said with the recipe's own settings ("": the user's --no-tune).
  std::string no_tune_why;
  // The pipeline layouts the trials measure beside data parallelism (the memory model's
  // promising ones for the reference batch, launcher::tuning_layouts()), and whether data
  // parallelism fits a rank's memory at all. Asked only when trials are about to run (a
  // worker process that may time the model; a cached plan needs none); unset: data
  // parallelism only. Its error stops the choice.
  std::function<Result<TrialLayouts>()> trial_layouts;
  bool dry_run = false;  // no_tune because nothing may start: notes say what a launch would do
  std::string work_dir;  // scratch for the tuner's files
  Progress* progress = nullptr;
  RankRunner run;
  // The models' throughput for a tuned plan (launch_prediction.h), given the choice so far
  // (its sweep and level fits); nullopt when they cannot say. Unset: the plan keeps the
  // trials' own average as its prediction.
  std::function<std::optional<double>(const recipes::Plan&, const PlanChoice&)> predict_sps;
};

struct PlanChoice {
  recipes::Plan plan;
  std::string source;   // "cache", "tuned" or "default"
  std::string db_path;  // the database it came from or was stored in ("" for default)
  bool from_site = false;
  std::string site;  // the row's site ("" local)
  // Who vouched for a cached plan (its row's signed_by): a trusted key's name, "unsigned"
  // (imported from a bundle or database no trusted key signed: the notes, the dry run and
  // summary.json say so), "" (made on this machine, or not cached).
  std::string signed_by;
  std::vector<std::string> notes;     // near hits, skipped layers, fallbacks: told to the user
  double tuning_s = 0;                // wall seconds spent measuring (0 for cache / default)
  nlohmann::json collective_outcome;  // tuner::outcome_to_json, null when not tuned now
  nlohmann::json recipe_outcome;      // the trial results, null when not tuned now
  std::vector<tuner::db::Measurement> collective_measurements;  // for the report's curves
  // This machine's per-level cost models (predict/level_fit.h): fitted when the collectives
  // were tuned now, else read back with a cached plan.
  std::vector<predict::LevelFit> level_fits;
  double budget_s = 0;  // tune.budget when tuned now (0 otherwise)
  // What the budget cut, one phrase each ("the collective sweep stopped at 1 MiB of 2 MiB",
  // "5 of 12 candidates not measured"); recorded in the plan's provenance too.
  std::vector<std::string> budget_cut;
};

// The gradient bucket sizes a job of `recipe` may allreduce: its comm.bucket when set, else
// the tuner's candidates (1, 4, 16 MiB below the gradient's size, and one bucket holding the
// whole gradient); empty for a model without gradients.
std::vector<uint64_t> job_bucket_sizes(const recipes::Recipe& recipe);
// The collective sweep's size range for those buckets: powers of two from half the smallest
// bucket (at least 64 KiB) to the first power of two at or above the largest (at most 256 MiB).
std::pair<uint64_t, uint64_t> sweep_range(const std::vector<uint64_t>& buckets);

// Looks up, tunes or falls back as described above. A cached plan is served only after the
// recipe's fixed settings are written over it and it passes recipes::check_plan_plausible and
// recipes::check_plan_lr_scale (an lr scale the recipe's rule would not give is refused): a
// plan that fails is not used, with a warning note, and the launch tunes or runs the recipe's
// own settings. A plan imported unsigned is served with a warning note saying so. Notes are
// printable (common/strings.h printable): whatever a database held cannot reach a terminal as
// control characters. Tuning keeps the budget: the sweep gets
// kCollectiveShare of it and the trials the rest, each given a deadline on the launcher's
// clock (the ranks' start-up counts), so that the whole tuning phase ends within tune.budget
// plus the ranks' shut-down; a cached collective plan whose measurements stop below the job's
// bucket sizes is measured again. Progress: each phase's rank events on `progress`
// (launch_progress.h). Errors: an unreadable user database, a tuning run whose ranks fail
// (the message names the rank), a store that fails.
Result<PlanChoice> choose_plan(const PlanRequest& request);

}  // namespace dltune::launcher
