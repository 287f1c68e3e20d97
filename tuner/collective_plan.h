// What `dltune tune --collectives` makes of a TuningOutcome (collective_tuning.h): the Plan it
// stores, the database rows of every measurement, and the tables it prints.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "recipes/plan.h"
#include "tuner/collective_tuning.h"
#include "tuner/db/records.h"

namespace dltune::tuner {

// A collective-only Plan: collectives.allreduce from the per-size choices (to_ranges(), each
// candidate split into algorithm and ring segment), job shape from the outcome, provenance
// "tuned" with a reason naming the strategy and the ranges. Errors (invalid_input): an outcome
// with no sizes, a chosen candidate that is not a valid plan algorithm, or a plan that fails
// recipes::validate_plan().
Result<recipes::Plan> plan_from_outcome(const TuningOutcome& outcome);

// One db::Measurement per measured (size, candidate), failed ones with their reason (cut and
// stripped of characters the database refuses), under `key` with `provenance`.
std::vector<db::Measurement> measurement_rows(const TuningOutcome& outcome, const db::Key& key,
                                              const db::Provenance& provenance);

// The readable report: per size the choice, its median, the runner-up and the paired ratio;
// then the failures, and with --verify the comparison with the oracle and the cost.
std::string format_outcome(const TuningOutcome& outcome);
// The plan's allreduce ranges, one per line: "  [0 B, 16 KiB)  rd".
std::string format_plan_ranges(const recipes::Plan& plan);

}  // namespace dltune::tuner
