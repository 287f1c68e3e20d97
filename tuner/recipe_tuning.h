// Recipe tuning (`dltune tune RECIPE`, and `dltune launch` on a cache miss): which per-rank
// batch, scaling mode, gradient bucket size and overlap setting, and which parallel layout
// (data parallelism, or a pipeline the memory model proposes), train this recipe fastest on
// this job shape, found by short trial trainings inside ONE launch of the ranks. The trial
// program never builds a candidate whose layout does not fit a rank's memory (it fails with
// the memory model's figures instead).
//
// Flow: generate_candidates() expands the recipe's free choices into TrainingPlans;
// tune_recipe() writes them with the base Plan (its collectives, job, placement) and the
// search schedule to WORK_DIR/candidates.json, runs `dltune-worker trial --recipe R
// --candidates C --out WORK_DIR/trials.json` on every rank once (through the caller's
// RunRanks), reads rank 0's result and turns it into a complete Plan (provenance kTuned, the
// reason naming the winner and what it beat by how much).
//
// The trial program (engine/worker/trial.cc) steps through the candidates without
// relaunching: successive halving on throughput, as common/halving.h decides it (every live
// candidate a short trial; the best 1/eta by samples over time of all their trials so far,
// rounded up and at least two, go on with trials longer by the factor the field shrank, so
// every round costs the same steps; the round that compares two finalists is the last), the
// candidates of a round measured interleaved in chunks of a few steps (round-robin, so the
// machine's slow phases hit all alike), decisions taken on the maximum step time over the
// ranks so every rank decides alike, a failing candidate recorded with its reason, and no
// round started that would overrun the budget.
// A candidate whose loss turns NaN on a rank, or whose loss averaged over the ranks and a
// chunk's steps rises above 1.5x its warm-up loss, has diverged (its scaled learning rate is
// too high for the model) and fails, and with it every candidate that
// trains alike (same batches and learning-rate schedule; only bucket or overlap differ); when
// every survivor of a round failed, the best eliminated candidates run that round again.
// In halving, candidates that train alike share one trainer (one model built and warmed per
// batch and schedule; Trainer::set_communication() switches its bucket size and overlap), and
// a round's order spreads each family's members apart so that none runs just after a sibling
// warmed the caches for it.
// With `grid` every candidate is measured once with the longest trial length, alone (its own
// trainer; its own divergence): the reference.
//
// The candidates file (version 1):
//   {"version": 1, "recipe": PATH, "base": PLAN_JSON,
//    "candidates": [{"label": "b64 weak bucket=1MiB overlap", "training": TRAINING_JSON,
//                    optional "parallel": PARALLEL_JSON (a pipeline layout; training is then
//                    per replica)}],
//    "schedule": {"grid": false, "eta": 4, "min_steps": 4, "max_steps": 64, "warmup_steps": 1,
//                 "chunk_steps": 2, "budget_s": 20, "keep_trainers": true}}
// The trials file rank 0 writes:
//   {"version": 1, "ranks": 2, "grid": false, "budget_exhausted": false, "winner": 3,
//    "rounds": 3, "tuning_s": 8.1, "trial_s": 6.0, "setup_s": 1.2, "trainers_built": 4,
//    "trials": [{"candidate": 0, "label": "...", "round": 0, "steps": 4, "samples_per_s": 1234.5,
//                "step_s": 0.05, "failed": false, "reason": ""}]}
// (step_s: the mean over the trial's steps of the slowest rank's step time; samples_per_s =
// global batch / step_s. A trial may also carry "median_samples_per_s" and "iqr_samples_per_s",
// the median and interquartile range of the per-step throughput; they are kept when present.)
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/halving_json.h"
#include "common/result.h"
#include "recipes/plan.h"
#include "recipes/plan_fit.h"
#include "recipes/recipe.h"
#include "tuner/db/records.h"

namespace dltune::tuner {

// ---- Candidates

struct RecipeCandidate {
  std::string label;  // "b64 weak bucket=1MiB overlap"
  recipes::TrainingPlan training;
  // A pipeline layout (stages > 1) the candidate trains under instead of the base plan's data
  // parallelism; nullopt: data parallel over every rank. `training` is then per replica.
  std::optional<recipes::ParallelLayout> layout;
};

// Whether two candidates train the same model the same way (recipes::trains_alike() on their
// training, and the same layout): the trial program shares one trainer among them.
bool trains_alike(const RecipeCandidate& a, const RecipeCandidate& b);

// The per-rank batch the search centres on and the global batch the recipe's lr is meant for
// (recipes/plan_fit.h): one definition with the check of a served plan, which must allow
// every lr the tuner gives.
using recipes::lr_reference_batch;
using recipes::reference_per_rank_batch;

// The learning-rate rule with warmup (Goyal et al.): lr_scale = recipes::lr_scale_for(rule,
// global_batch, reference), `rule` being the recipe's optimizer.lr_scaling unless given (auto:
// linear); warmup_steps = recipes::scaled_lr_warmup() (where the scale is > 1, max(the recipe's
// warmup, 5 % of the run's steps, 1), else the recipe's). Sets t->lr_scale and t->warmup_steps.
void apply_lr_rule(const recipes::Recipe& recipe, int ranks, recipes::TrainingPlan* t,
                   std::optional<recipes::LrScaling> rule = std::nullopt);

// Every configuration worth trying for `recipe` on `job`:
// - a batch the recipe names (batch.per_rank or batch.global) is kept as it is: the user chose
//   the optimisation its learning rate was set for; only `batch: auto` searches:
// - per-rank batch (auto): powers of two from reference/2 to reference x 4 (the reference itself
//   included even when not a power of two), keeping global batches within
//   training.max_global_batch and the training samples;
// - scaling: the recipe's mode; with kAuto both: weak at each batch, and strong at the
//   recipe's global batch (its lr reference) split over the ranks;
// - bucket bytes: the recipe's when set, else 1, 4, 16 MiB where smaller than the model's
//   gradient bytes, plus one bucket holding every gradient;
// - overlap: the recipe's when on/off, else both.
// Configurations that would run identically (same per-rank and global batch, bucket, overlap)
// appear once. Errors (invalid_input): a model whose shapes do not check, no batch within the
// limits (names the limit).
Result<std::vector<RecipeCandidate>> generate_candidates(const recipes::Recipe& recipe,
                                                         const recipes::JobShape& job);

// The batch layout_candidates() trains pipelines at, for the layout search to size them by:
// weak scaling reference_per_rank_batch per replica; a recipe's fixed global batch, or strong
// scaling's lr_reference_batch, over all replicas.
struct LayoutBatch {
  int64_t samples = 1;
  bool per_replica = true;
};
LayoutBatch layout_reference_batch(const recipes::Recipe& recipe, int ranks);

// The candidates that train `layouts` (pipelines, stages > 1, and data parallelism with the
// optimizer state offloaded, from the memory model's layout search for the reference batch;
// launcher::query_layouts; plain data parallelism is left out) at the recipe's reference
// settings: weak scaling keeps reference_per_rank_batch per replica and grows the global batch
// with the replicas; a recipe that fixes its global batch, or scales strongly, splits that
// batch over the replicas (a layout whose replicas do not divide it is left out). Bucket and
// overlap: where replicas reduce, the variants data parallelism searches (the recipe's where
// it fixes them), else the plan's defaults; the lr follows apply_lr_rule(). Labels are the
// data-parallel label with the layout appended ("b64 weak bucket=4MiB overlap, 1x2 stages m8
// 1f1b").
std::vector<RecipeCandidate> layout_candidates(const recipes::Recipe& recipe,
                                               const recipes::JobShape& job,
                                               const std::vector<recipes::ParallelLayout>& layouts);

// A fallback when every candidate diverged: for a recipe whose optimizer.lr_scaling is auto,
// the candidates whose lr was scaled up, again with `rule` (labels end in " lr=" and its
// name); empty when the recipe fixes its rule or no candidate's lr was scaled up.
std::vector<RecipeCandidate> fallback_lr_candidates(const std::vector<RecipeCandidate>& candidates,
                                                    const recipes::Recipe& recipe,
                                                    const recipes::JobShape& job,
                                                    recipes::LrScaling rule);

// ---- The search schedule and its results

// The trial search's schedule: halving's options (min_steps: timed steps of a first-round
// trial; max_steps: the longest trial, the grid's; keep_built: each live candidate's trainer
// kept between chunks and rounds) and the steps per interleaved slice. One struct with the
// trial program, and one JSON form (common/halving.h schedule_to_json / schedule_from_json).
using TrialSchedule = halving::Schedule;
using halving::schedule_from_json;
using halving::schedule_to_json;
using halving::trials_from_json;
using halving::trials_to_json;
// A candidate's TRAINING_JSON in the candidates file: the "training" object of a plan
// (recipes::plan_to_json).
nlohmann::json training_json(const recipes::TrainingPlan& t);
// A candidate's entry in the candidates file: {"label", "training"}, and with a layout its
// "parallel" object (as in a plan's JSON, for a plan like `base` with that layout).
nlohmann::json candidate_json(const RecipeCandidate& k, const recipes::Plan& base);

// One candidate's trial, as the trial program reports it (common/halving_json.h).
using halving::TrialRecord;

// The winner of a set of trials: among candidates that never failed, were measured (not
// skipped) and reached the latest round, the most samples per second over all its trials
// (total samples / total time; the finalists ran the same trials). Errors: peer_failed when
// every candidate failed, listing the reasons; not_found when none failed but none was
// measured (the budget ran out first).
Result<size_t> choose_winner(const std::vector<TrialRecord>& trials);

// ---- Running it (recipe_tune_run.cc)

// Starts `dltune-worker <worker_args...>` on every rank of the job and returns when all have
// exited; an error when any failed (with what is known: rank, exit code).
using RunRanks = std::function<Status(const std::vector<std::string>& worker_args)>;

struct RecipeTuneRequest {
  recipes::Recipe recipe;
  std::string recipe_path;  // the file the ranks load (absolute or relative to their cwd)
  recipes::JobShape job;
  recipes::Plan base;  // collectives rules, job, placement to keep; training is replaced
  double budget_s = 60;
  // > 0: the trials end by this time (seconds since the Unix epoch), so that the ranks'
  // start-up counts against the budget; tune_recipe() then gives the ranks this deadline.
  double deadline = 0;
  // Rank 0 appends the trial search's progress events here ("" none; engine/worker/trial.h).
  std::string progress_path;
  bool grid = false;
  // Schedule overrides (0 = the default for the budget).
  int min_steps = 0, max_steps = 0;
  // A near hit's training choices (same node family and recipe, another machine size or job
  // shape): the search is narrowed to the candidates near it (narrow_candidates()).
  std::optional<recipes::TrainingPlan> hint;
  std::string hint_source;  // where the hint came from, for the plan's reason
  // The near hit's layout, when it was a pipeline: only the layouts with as many stages are
  // measured (when any is among `layouts`).
  std::optional<recipes::ParallelLayout> hint_layout;
  // Layouts measured beside plain data parallelism (layout_candidates(): pipelines, and data
  // parallelism with the optimizer state offloaded), and whether plain data parallelism fits a
  // rank's memory at all: when it does not, only the layouts are tried (the trial program would
  // refuse each plain data-parallel candidate as not fitting anyway).
  std::vector<recipes::ParallelLayout> layouts;
  bool data_parallel_fits = true;
};

// The candidates near `hint`: the same scaling mode and overlap setting, a per-rank batch
// within a factor of 2 of the hint's and a bucket within a factor of 4. When none is near, the
// list comes back unchanged (a hint narrows the search, it never empties it).
std::vector<RecipeCandidate> narrow_candidates(const std::vector<RecipeCandidate>& candidates,
                                               const recipes::TrainingPlan& hint);

struct RecipeAlternative {
  std::string label;
  double samples_per_s = 0;  // in the last round it ran
  // Winner / it (> 1: the winner was faster) over the cycles both ran (every round it ran),
  // with the ~95 % interval [lo, hi] and the number of paired cycles (plan_confidence.h); hi is
  // 0 when there were too few for an interval. Without chunks, the ratio of the two trials'
  // throughputs in its last round and rounds 0.
  double ratio = 0, lo = 0, hi = 0;
  int rounds = 0;
  int round = 0;
  bool failed = false;
  bool skipped = false;  // not measured: the budget ran out first
  std::string reason;
};

struct RecipeTuneOutcome {
  recipes::Plan plan;  // base collectives/job/placement + the winner's training, kTuned
  std::vector<RecipeCandidate> candidates;
  size_t winner = 0;
  std::vector<RecipeAlternative> alternatives;  // every other candidate
  nlohmann::json trials;                        // the worker's trials file as written
  int ranks = 0;
  int rounds = 0;
  bool grid = false;
  bool budget_exhausted = false;
  int skipped = 0;       // candidates the budget left unmeasured
  int extra_cycles = 0;  // cycles the finalists ran beyond their round to separate them
  double tuning_s = 0;   // wall time of the one launch, start to finish
  double trial_s = 0;    // seconds spent in timed steps (the measurement cost)
  double setup_s = 0;    // seconds spent building trainers and in warm-up steps
};

// Builds the outcome from the candidates and the trials file text: the winner, every other
// candidate compared with it (RecipeAlternative), and the plan's provenance: a reason that
// names the winner, its throughput and the closest rivals with their intervals ("b64 ... won
// halving over 12 candidates at 4,249 samples/s; it beat b128 ... by 1.12x (95 % interval
// 1.05-1.19, 12 rounds), ..."), the Confidence against the closest rival, the estimated
// regret (training_regret()) and what the budget cut. When the budget left every candidate
// unmeasured, the first candidate (the recipe's reference settings) is the plan and the reason
// says so. Errors (internal_error): malformed trials, a candidate index out of range; every
// candidate failed (peer_failed).
Result<RecipeTuneOutcome> outcome_from_trials(const RecipeTuneRequest& req,
                                              const std::vector<RecipeCandidate>& candidates,
                                              const nlohmann::json& trials_file);

// How many trainers the trial search builds for `candidates`: the grid one per candidate;
// halving one per family of candidates that train alike (recipes::trains_alike(): only bucket
// size and overlap differ; the worker's trial search shares one trainer among them).
size_t trial_trainers(const std::vector<RecipeCandidate>& candidates, bool grid);

// Timed steps after which a trial's step time has settled past the warm-up: a lone candidate
// (nothing to compare it with: its trial only measures its throughput for the plan) runs at
// least this many, and the launch summary warns about a plan whose winner ran fewer.
inline constexpr int kSettledTrialSteps = 10;

// The schedule tune_recipe uses for `candidates` candidates needing `trainers` trainers
// (trial_trainers()) of a model with `gradient_bytes` of gradients, and the request. The
// trainers stay resident between rounds when all of them fit in 2 GiB. A lone candidate's
// trial runs kSettledTrialSteps steps (unless the request sets min_steps).
TrialSchedule schedule_for(const RecipeTuneRequest& req, size_t candidates, size_t trainers,
                           int64_t gradient_bytes);

// Generates the candidates, writes WORK_DIR/candidates.json, calls run_ranks once with
// {"trial", "--recipe", recipe_path, "--candidates", C, "--out", R, "--budget", S
// [, "--deadline", D][, "--progress", P][, "--grid"]}, reads WORK_DIR/trials.json. When every
// candidate diverged and fallback_lr_candidates() offers square-root scaling, runs those the
// same way in WORK_DIR/sqrt-lr/ with the budget left (with a deadline: only when at least
// max(3 s, 15 % of the budget) is left, else the unscaled lr is the plan, unmeasured, and the
// reason says so; without one: at least a quarter of the budget), and if they all diverge too,
// unscaled lr in WORK_DIR/none-lr/; the plan's reason then says which rules diverged. With
// lr_scaling auto, a winner whose scaled-up lr its trainer did not run past the lr warm-up + 10
// steps in the trials (a small budget) gets the recipe's lr unscaled instead, and the reason says
// so. Errors: bad recipe (invalid_input), the ranks' failure, every candidate failed (each search's
// reasons when a fallback ran).
Result<RecipeTuneOutcome> tune_recipe(const RecipeTuneRequest& req, const RunRanks& run_ranks,
                                      const std::string& work_dir);

// One db::RecipeTrial per trial of the outcome (every candidate in every round it ran), with
// the candidate's configuration, under `key` (the plan's) with `provenance`; labels and reasons
// cleaned of characters the database refuses (db::clean_text). Trials whose candidate index is
// out of range (outcome_from_trials() already refuses them) or that db::validate_trial()
// refuses (logged) are left out, so that storing them never fails the plan.
std::vector<db::RecipeTrial> recipe_trial_rows(const RecipeTuneOutcome& outcome, const db::Key& key,
                                               const db::Provenance& provenance);

nlohmann::json recipe_outcome_to_json(const RecipeTuneOutcome& o);
Result<RecipeTuneOutcome> recipe_outcome_from_json(const nlohmann::json& j);
// A readable table: every candidate with its best round, samples/s, ratio to the winner, and
// the plan's training line.
std::string format_recipe_outcome(const RecipeTuneOutcome& o);

// "b64 weak bucket=1MiB overlap" / "b64 strong(g128) bucket=one(2MiB) no-overlap".
std::string candidate_label(const recipes::TrainingPlan& t, uint64_t gradient_bytes);
// 4 x the model's parameter count (f32 gradients); 0 when the model's shapes do not check.
int64_t gradient_bytes(const recipes::Recipe& recipe);

}  // namespace dltune::tuner
