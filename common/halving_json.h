// What the recipe tuner and the trial program (`dltune-worker trial`) exchange about a trial
// search (common/halving.h), in one place so that each form has one writer and one reader: the
// schedule the tuner plans and the trials the program measured.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/halving.h"
#include "common/result.h"

namespace dltune::halving {

// A recipe trial search's schedule, as the tuner plans it (tuner/recipe_tuning.h
// schedule_for) and the trial program runs it (engine/worker/trial.cc): halving's options and
// the steps of each interleaved chunk of a trial. The candidates file carries it as
// {"grid", "eta", "min_steps", "max_steps", "warmup_steps", "chunk_steps", "budget_s",
// "keep_trainers"} (keep_trainers: halving's keep_built).
struct Schedule {
  Options halving;
  int chunk_steps = 2;
};
// schedule_from_json: every key required; invalid_input naming a missing or mistyped key, the
// rule validate() finds broken, or chunk_steps < 1.
nlohmann::json schedule_to_json(const Schedule& s);
Result<Schedule> schedule_from_json(const nlohmann::json& j);

// One candidate's trial, as the trial program measured it.
struct TrialRecord {
  size_t candidate = 0;
  std::string label;
  int round = 0;
  int steps = 0;
  double samples_per_s = 0;
  double step_s = 0;
  std::optional<double> median_sps, iqr_sps;  // when the trial program reports them
  // The step split, when the trial program reports it: compute (input, forward, backward)
  // and exposed communication per step (this rank's means over the trial's steps), and each
  // gradient bucket's allreduce alone (seconds, the slowest rank's median, in bucket order).
  std::optional<double> compute_s, exposed_comm_s;
  std::vector<double> allreduce_s;
  // Its trainer's training memory, when the trial program measured it: the memory model's
  // estimate for the rank with the largest one, and that rank's measured peak (resident, or
  // the GPU engine's device peak), bytes.
  std::optional<int64_t> memory_estimate_bytes, memory_peak_bytes;
  bool failed = false;
  std::string reason;
  bool skipped = false;  // not measured: the budget ran out before its first trial
  // (steps, seconds) of each interleaving cycle, in order: cycle k of every candidate of a
  // round ran back to back (plan_confidence.h pairs them); empty from older trial programs.
  std::vector<std::pair<int, double>> chunks;
};
nlohmann::json trials_to_json(const std::vector<TrialRecord>& t);
Result<std::vector<TrialRecord>> trials_from_json(const nlohmann::json& j);

}  // namespace dltune::halving
