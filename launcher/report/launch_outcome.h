// Steps 4-5 of `dltune launch`: following rank 0's metrics while the job runs, and turning the
// run directory's files into summary.json, report.html and the summary a person reads.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/progress.h"
#include "common/result.h"
#include "launcher/flow/launch_plan.h"
#include "launcher/flow/launch_prediction.h"
#include "launcher/flow/restarts.h"
#include "launcher/flow/run_dir.h"
#include "recipes/recipe.h"
#include "tuner/recipe_tuning.h"

namespace dltune::launcher {

// Everything the summary is made of.
struct RunFacts {
  std::string recipe;
  int ranks = 1, nodes = 1;
  std::string backend;
  int cores_per_node = 0;  // usable cores of this node (0 = unknown)
  // Nodes that are one machine and share its cores (launch_prediction.h's nodes_per_machine).
  int nodes_per_machine = 1;
  std::string binding;  // launch.binding: none, core, numa, auto
  PlanChoice choice;
  std::string threads_reason;   // why the ranks' threads (launch_job.h Job::threads_reason)
  nlohmann::json shape_search;  // the ranks x threads search (shape_search.h), else null
  nlohmann::json worker;        // rank 0's worker summary (dltune-worker train --summary)
  double baseline_sps = 0;      // the same per-rank batch on one rank (0 = not measured)
  int64_t baseline_steps = 0;   // its length, its interval and its binding (launch_job.h)
  double baseline_rel_ci = 0;
  std::string baseline_bind;
  double baseline_seconds = 0;   // the time its steps took
  double baseline_budget_s = 0;  // the time they were allowed (launch_job.h baseline_budget_s)
  std::string baseline_mode = "auto";  // launch.baseline: auto, measure, off (not measured)
  // A baseline reused from the database (launch_job.h Baseline): when (Unix seconds, > 0) and
  // where it was measured; 0 and "" when this launch measured it.
  int64_t baseline_measured_at = 0;
  std::string baseline_measured_on;
  std::string baseline_error;     // why it was not measured ("" when it was or was not tried)
  double wall_seconds = 0;        // the whole launch
  uint64_t gradient_bytes = 0;    // bytes allreduced per step
  double copy_gbs = 0;            // single-core copy bandwidth at a bucket's size, for the bound
  LaunchPrediction prediction;    // what the models said before the run (launch_prediction.h)
  std::string resumed_from;       // checkpoint a resumed run started from ("" none)
  std::vector<Restart> restarts;  // the training's restarts (launch.restarts), in order
  nlohmann::json reshaped;        // --resume on another shape: reshape_json(), else null
  // Text data: the unigram entropy of the file in bits per byte (what a model that learned
  // only byte frequencies reaches); < 0 for other data.
  double unigram_entropy_bits = -1;
  // What the loss is at chance: the classes of a classifier, the vocabulary of a text model
  // (recipe data.classes; 0 = unknown). A run that ends at ln(classes) learned nothing.
  int64_t classes = 0;
};

// The step and eval events of metrics.jsonl; a step that appears twice (a resumed run redoes
// the steps after its checkpoint) keeps its last occurrence.
struct MetricsLog {
  std::vector<nlohmann::json> steps, evals;
};
MetricsLog read_metrics(const std::string& path);

// summary.json (DESIGN.md "Machine-readable outputs"): recipe, ranks, threads_per_rank,
// threads_reason, shape_search (the ranks x threads search, shape_search.h
// shape_choice_json(); null when the job fixed its ranks or threads), precision, nodes, steps,
// throughput_sps, scaling_efficiency, final_loss, heldout_accuracy, heldout_loss (per
// prediction, nats; text data also heldout_bits_per_byte and unigram_entropy_bits; null when
// not measured), plan_source, plan, tuning_seconds, wall_seconds, resumed_from, run_dir,
// "restarts" (launcher/flow/restarts.h restarts_json(): [] when none), "reshaped" (a run
// resumed on another shape: launcher/flow/reshape.h reshape_json(); null otherwise), plus:
// - "step_time": compute_s, exposed_comm_s, other_s and total_s of the mean timed step (all
//   measured over the same steps; total = global batch / throughput), timed_steps, and
//   outside_steps_s (start-up, the first step, evaluation, checkpoints: once, not per step);
// - "allreduce": the sweep's estimate per step (null with "sweep_note" saying why), the bound
//   (null with "bound_note" when it cannot be computed), the exposed time beyond the
//   allreduce (waiting for the slowest rank), the collectives' estimated regret at the job's
//   buckets;
// - "memory": the memory model against the run's measured peak, for the rank with the largest
//   estimate (rank, stage, estimate_bytes, measured_bytes or null, what was measured) and the
//   largest relative error over the ranks (max_error); null when the worker reported none;
// - "confidence" (the plan's: the winner against its closest rival, with the ~95 % interval),
//   "regret" (the training choices'), "budget" (tune.budget and what it cut);
// - the database, "ranks_shared_cores" (more ranks per machine than cores), and "warnings": what
//   the user should not miss although the job succeeded, each with what to do: the 1-rank
//   baseline failed, or its interval stayed wider than kBaselineRelCi; N ranks were slower
//   than 1, or more than kSuperlinearEfficiency times N ranks' worth of the baseline (the
//   baseline was slowed: the two ran at different times on a shared machine); ranks shared
//   cores; the winner's trials ran fewer than kTrialMinTrustedSteps
//   steps, or measured a throughput kTrialMismatch times off the training's; the allreduce
//   bound or estimate could not be computed (why); the model did not learn: the loss of a run
//   of >= kNoLearningMinSteps steps ended at or above kNoLearningLossShare of its first logged
//   loss, or a run of >= kChanceMinSteps steps ended at or above kChanceLossShare of the
//   loss at chance, ln(classes) (the advice: the lr may be too low when the plan scaled it
//   below kLowLrScale; else the run too short when under kNoLearningMinSteps; else the lr too
//   high).
inline constexpr int kNoLearningMinSteps = 100;
inline constexpr double kNoLearningLossShare = 0.95;
inline constexpr int kChanceMinSteps = 40;
inline constexpr double kChanceLossShare = 0.98;
inline constexpr double kLowLrScale = 0.25;
inline constexpr int64_t kTrialMinTrustedSteps = tuner::kSettledTrialSteps;
inline constexpr double kTrialMismatch = 2.0;
// N weak-scaling ranks, each on its own cores, cannot train N times faster than one rank alone
// on one of those cores: an efficiency above this says the two figures' conditions differed.
inline constexpr double kSuperlinearEfficiency = 1.1;
// Above this estimated collective regret (0.5: an exhaustive search could cut the allreduce
// time by a third), the summary warns that the sweep was too noisy or too short to trust.
inline constexpr double kCollectiveRegretWarn = 0.5;
nlohmann::json make_summary(const RunFacts& facts, const MetricsLog& log, const RunDir& dir);

// The summary as (label, value) rows: what format_summary() prints and report.html tabulates.
std::vector<std::pair<std::string, std::string>> summary_rows(const nlohmann::json& summary);

// The readable summary printed at the end: "summary: ..." then one row per line, the values
// wrapped at `width` columns (0: not wrapped) with words kept whole and continuation lines
// indented under the value column.
std::string format_summary(const nlohmann::json& summary, int width = 0);

// `text` broken into lines of at most `width` characters between words (a longer word stays
// whole on its own line), continuation lines indented by `indent` spaces.
std::string wrap_words(const std::string& text, size_t width, size_t indent);

// Writes report.html for the run.
Status write_report(const RunFacts& facts, const MetricsLog& log, const nlohmann::json& summary,
                    const RunDir& dir);

// Measures a single-core memcpy bandwidth (GB/s) over `bytes` (best of a few copies).
double measure_copy_gbs(uint64_t bytes);

}  // namespace dltune::launcher
