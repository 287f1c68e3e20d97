// Tuning a user's program (issue 39): which per-rank batch, ranks per node, threads per rank
// and gradient bucket run the program of a program recipe (recipes/program.h) fastest on this
// job, found by short runs of the program itself.
//
// How it works. program_candidates() expands the recipe's search space into candidates (every
// combination; ranks x threads never more than a node's cores). tune_program() runs successive
// halving over them (common/halving.h's Search, the one implementation the engine's trials use):
// every candidate runs a trial of `trial_steps` steps (the program is started afresh for each
// trial, through the caller's RunProgramTrial, since ranks per node and threads differ between
// candidates and a program cannot change them while it runs); the best 1/eta by the
// throughput the program reported go on to trials longer by the factor the field shrank; the
// round that compares two finalists is the last. A trial that fails (a non-zero exit, a crash,
// no throughput line, a hang past trial_timeout) drops its candidate with the reason and the
// last lines of its output; when all fail the tuning fails with every reason. No trial is
// started whose estimated wall time (the candidate's last trial scaled to the new length, or
// the round's mean start-to-end time so far, start-up included) would end past the budget; the
// candidates it leaves unmeasured are listed as skipped. The first trial always runs. With
// `grid`, every candidate runs once at the longest trial length, ignoring the budget: the
// reference the search is measured against.
//
// Screening. A trial pays a program start (seconds of Python and a rendezvous), so measuring
// every candidate once can cost more than the halving saves. Where the search varies two or more
// of batch, ranks x threads and bucket and an additive model of log throughput over them is
// identified by at most 3/4 of the candidates (tuner/screening.h), the first round measures
// that design first, fits the model, and measures of the rest only those it cannot rule out:
// predicted within a margin of the best measured (twice the larger of the fit's residual and
// kScreeningNoise, a short trial's noise), or not predictable (a level whose candidates all
// failed), unless the design's own residual is above kScreeningMaxResidual (the settings
// interact: every candidate is then measured). The others are set aside unmeasured
// (halving::Search::set_aside: they run only if every measured candidate fails). The halving then
// goes on over the measured field, racing: a candidate measured more than twice kScreeningNoise
// below a round's best leaves with the halved ones.
//
// The winner becomes a Plan (program_plan()): its values in the plan's own fields (per-rank
// and global batch, bucket bytes, the job's ranks per node and threads per rank), with the
// base plan's collective rules, and a reason naming the winner, its throughput and the runner-
// up. values_from_plan() reads them back for a launch that finds the plan in the database.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "recipes/plan.h"
#include "recipes/program.h"
#include "topology/topology.h"
#include "tuner/db/records.h"

namespace dltune::tuner {

// What the candidates depend on of the machine the job runs on.
struct ProgramMachine {
  int nodes = 1;
  int cores_per_node = 1;  // physical cores a node gives the job
  int numa_per_node = 1;
};
// One node of `topo` (its cores and NUMA domains, at least 1 each).
ProgramMachine program_machine(const topology::Topology& topo);

// A first-round trial's relative noise the screening margin never goes below (log rate): short
// trials of the examples on these shared 2-core machines vary by about 5 %.
inline constexpr double kScreeningNoise = 0.05;
// Candidates the design measures beyond those that identify the model: the residual's degrees
// of freedom, which see an interaction the model cannot hold (one sees it too rarely).
inline constexpr size_t kScreeningExtra = 2;
// A design's residual above this says the settings interact too much for the additive model:
// the first round then measures every candidate. Four times the noise floor: the example's
// designs left residuals of 3 to 17 % on a 2-core VM whose runs of one candidate differ by up
// to 25 %; below it the margin, twice the residual, widens with the misfit.
inline constexpr double kScreeningMaxResidual = 4 * kScreeningNoise;

struct ProgramCandidate {
  recipes::ProgramValues values;  // steps 0: each trial sets its own
  std::string label;              // "b64 2x1t bucket=4MB" (ranks per node x threads)
};

// Every combination of the search space on `machine`:
// - ranks per node: search.ranks_per_node; auto: 1, the NUMA domains, and powers of two up to
//   the cores, and the cores (deduplicated, sorted); unsearched: launch.ranks / nodes when
//   launch.ranks is set, else launch.ranks_per_node, else one per NUMA domain;
// - threads per rank: search.threads_per_rank (combinations with ranks x threads above the
//   cores left out); auto or unsearched: launch.threads_per_rank when set, else the cores over
//   the ranks per node (at least 1);
// - batch and bucket_mb: the lists, else 0 (unset).
// ranks = ranks per node x nodes. Errors (invalid_input): no combination fits the cores (names
// the largest asked for), launch.ranks not divisible by the nodes, more than 256 candidates.
Result<std::vector<ProgramCandidate>> program_candidates(const recipes::ProgramRecipe& recipe,
                                                         const ProgramMachine& machine);

// "b64 2x1t bucket=4MB": the values set, in that order ("2x1t": ranks per node x threads).
std::string program_label(const recipes::ProgramValues& v);

// The program's throughput from its output: the last line `pattern` matches, its first capture
// group read as a number. Errors: not_found when no line matches ("printed no line matching
// 'PATTERN'"); invalid_input when the captured text is not a finite number > 0 (quoting it) or
// the pattern is not a valid regex.
Result<double> throughput_from_output(std::string_view pattern, std::string_view output);
// The throughput from the JSON lines of a metrics file: `key` of the last line that has it
// (a number > 0; lines that are not JSON objects are skipped). Errors: not_found when no line
// has the key; invalid_input when its value is not a finite number > 0.
Result<double> throughput_from_metrics(std::string_view key, std::string_view jsonl);

// One trial as the caller ran it.
struct ProgramTrialResult {
  double samples_per_s = 0;  // > 0 when it did not fail
  double wall_s = 0;         // start to end, start-up included
  bool failed = false;
  std::string reason;       // why it failed: "exited with code 1", "ran past its 120 s", ...
  std::string output_tail;  // the last lines of its output (failed trials), for the report
};
// Runs the program once with the candidate's values and `steps` ({steps}, DLTUNE_TRIAL_STEPS)
// and `trial_seconds` (DLTUNE_TRIAL_SECONDS), stopping it after `timeout_s`.
using RunProgramTrial = std::function<ProgramTrialResult(
    const ProgramCandidate& candidate, int64_t steps, double trial_seconds, double timeout_s)>;

struct ProgramTuneOptions {
  double budget_s = 120;
  int64_t first_steps = 20;  // a first-round trial's steps (the recipe's trial_steps)
  int64_t max_steps = 0;     // the longest trial; 0: first_steps x 8
  // Seconds a trial of first_steps is told it may take (DLTUNE_TRIAL_SECONDS, scaled with the
  // steps); 0: budget / (2 x candidates), at least 2.
  double first_trial_seconds = 0;
  double timeout_s = 120;  // the recipe's trial_timeout: a trial is stopped after this
  int eta = 3;
  bool grid = false;
  // The model-assisted search (the recipe's tune.screening: auto; off sets false): the first
  // round screened by the additive model where that saves program starts, and every round
  // racing (a survivor measured more than twice kScreeningNoise below the round's best is not
  // measured again: halving::Options::drop_below). The grid never screens.
  bool screening = true;
};

struct ProgramTrialRow {
  size_t candidate = 0;
  int round = 0;
  int64_t steps = 0;
  double samples_per_s = 0;
  double wall_s = 0;
  bool failed = false;
  std::string reason;
  std::string output_tail;
};

struct ProgramTuneOutcome {
  std::vector<ProgramCandidate> candidates;
  size_t winner = 0;
  std::vector<ProgramTrialRow> trials;  // in the order they ran
  std::vector<size_t> skipped;          // candidates the budget left unmeasured (not set aside)
  int rounds = 0;
  bool grid = false;
  bool budget_exhausted = false;
  // The first round's screening (tuner/screening.h), when it ran: the candidates measured to
  // fit the model, those it set aside unmeasured (predicted below the best measured by more
  // than the margin), each candidate's predicted samples/s (0: no prediction), the fit's
  // residual (RMS of log rate; 0 without a degree of freedom) and the margin it used.
  bool screened = false;
  std::vector<size_t> design;
  std::vector<size_t> set_aside;
  std::vector<double> predicted_sps;
  double model_rms = 0;
  double margin = 0;
  std::string screening_note;  // one sentence: what was measured, fitted and set aside
  double tuning_s = 0;         // start of the first trial to the end of the last
  double winner_sps = 0;       // the winner's throughput over all its trials (halving's rate)
  // "b64 2x1t won halving over 12 candidates at 1,234 samples/s; runner-up b32 2x1t at 1,100
  // (1.12x); 3 failed (b256 ...: exited with code 1); 2 not measured (budget)"
  std::string reason;
};

// The search above. `now` (seconds, monotonic) is injectable for tests. Errors: invalid_input
// for no candidates or bad options (eta < 2, first_steps < 1, budget <= 0); peer_failed when
// every candidate failed, listing each candidate's label and reason.
Result<ProgramTuneOutcome> tune_program(const std::vector<ProgramCandidate>& candidates,
                                        const RunProgramTrial& run_trial,
                                        const ProgramTuneOptions& options,
                                        const std::function<double()>& now = {});

// The plan a program runs with: `base` (its collective rules, placement dropped) with the
// candidate's values: training.per_rank_batch = batch (1 when unset), global_batch = batch x
// ranks, weak scaling, lr_scale 1, bucket_bytes = bucket_mb MiB (the plan's default when
// unset); job = nodes x ranks per node x threads; provenance as given (recipe = the recipe's
// name).
recipes::Plan program_plan(const recipes::ProgramRecipe& recipe, const ProgramCandidate& chosen,
                           int nodes, const recipes::Plan& base,
                           const recipes::Provenance& provenance);
// The values a plan holds for `recipe`: only the settings the recipe's search varies are taken
// from the plan (batch, bucket_mb, ranks per node, threads); the others as program_candidates()
// sets them. Errors (invalid_input): a plan value the recipe's search does not list (the plan
// was tuned for another search), or a job of another node count than `machine`'s.
Result<ProgramCandidate> values_from_plan(const recipes::ProgramRecipe& recipe,
                                          const ProgramMachine& machine, const recipes::Plan& plan);

// The job shapes a program recipe's plans are stored under: each distinct (nodes, ranks per
// node) of `candidates`, in order. A plan is stored under its own shape (the database requires
// the key's shape to be the plan's), so a launch whose search varies the ranks per node looks
// each of them up and takes the newest plan that fits the recipe.
std::vector<db::JobShape> program_key_shapes(const std::vector<ProgramCandidate>& candidates,
                                             int nodes);

// One db::RecipeTrial per trial row under `key` (per_rank_batch = batch or 1, global_batch,
// "weak", bucket bytes, the label with the ranks per node and threads), for the database;
// rows db::validate_trial() refuses are left out (logged).
std::vector<db::RecipeTrial> program_trial_rows(const ProgramTuneOutcome& outcome,
                                                const db::Key& key,
                                                const db::Provenance& provenance);

// A readable table of every candidate: its best round, samples/s, ratio to the winner, and
// why it failed or was skipped.
std::string format_program_outcome(const ProgramTuneOutcome& outcome);

}  // namespace dltune::tuner
