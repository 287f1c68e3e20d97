// The search of `dltune-worker trial` (engine/worker/trial.h says what it does): successive
// halving over the recipe tuner's candidates on every rank of the job, with the candidates
// that train alike sharing one trainer, the budget's cost model, the paired comparison of the
// finalists and the records rank 0 writes. trial.cc reads the files and runs it.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "common/halving_json.h"
#include "common/result.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::engine {

// The candidates file's schedule (common/halving_json.h, as the tuner writes it).
using TrialSchedule = halving::Schedule;

class TrialSearch {
 public:
  // `world` may be null (one rank alone); `progress` is the events file rank 0 appends to ("":
  // none). `recipe` must outlive the search.
  TrialSearch(const recipes::Recipe& recipe, comm::Communicator* world, TrialSchedule schedule,
              const std::string& progress);
  ~TrialSearch();
  TrialSearch(const TrialSearch&) = delete;
  TrialSearch& operator=(const TrialSearch&) = delete;

  // Adds a candidate (every rank alike, before run()). A plan the recipe cannot train, or whose
  // layout does not fit a rank's memory, becomes a failed candidate with its reason, not an
  // error.
  Status add(const std::string& label, const recipes::Plan& plan);
  // Runs the search within the schedule's budget. Errors: communication failures, and a step
  // that broke on some ranks only (the ranks are then in different collectives).
  Status run();
  // Rank 0's answer: {"version", "ranks", "rounds", "trials": [...], ...} (trial.h).
  nlohmann::json result() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dltune::engine
