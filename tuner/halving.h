// Successive halving: find the fastest of many training configurations without training each
// one for long.
//
// Every candidate first runs a short trial; the best 1/eta of them run trials eta times
// longer; and so on until one is left or the budget runs out. Within a round candidates run
// in rotating order (interleaved, for the same reason as tuner/measure.h) and are ranked by
// throughput. A failed trial (crash, out of memory, timeout) drops that candidate with its
// reason; the search goes on with the others.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"

namespace dltune::tuner {

struct HalvingOptions {
  int eta = 3;           // keep the best 1/eta each round
  int min_steps = 8;     // trial length of the first round, in training steps
  int max_steps = 200;   // no trial is longer than this
  double budget_s = 60;  // stop starting rounds once the trials' total time exceeds this
};

// Runs candidate `index` for `steps` training steps and returns its measured throughput in
// samples/s and the seconds the trial took, or an error that eliminates the candidate.
struct TrialOutcome {
  double samples_per_s = 0;
  double seconds = 0;
};
using TrainingTrial = std::function<Result<TrialOutcome>(size_t index, int steps)>;

struct HalvingEntry {
  size_t index = 0;
  double samples_per_s = 0;  // from the longest trial it ran
  int steps = 0;             // length of that trial
  int rounds_survived = 0;
  bool failed = false;
  std::string failure;
};

struct HalvingResult {
  std::vector<HalvingEntry> ranking;  // the winner first, then by rounds survived and speed
  double cost_s = 0;                  // total seconds of every trial
  int rounds = 0;
  bool budget_exhausted = false;  // stopped by the budget before one was left
};

// Runs successive halving over `count` candidates. Errors: count == 0, bad options, or every
// candidate failed (the error lists each reason).
Result<HalvingResult> successive_halving(size_t count, const TrainingTrial& trial,
                                         const HalvingOptions& options);

}  // namespace dltune::tuner
