// What the next piece of a trial search will cost, from what the earlier pieces cost: the
// estimates that keep successive halving within its budget when building a trainer and
// warming it up costs as much as many steps (AlexNet: seconds per trainer). Pure arithmetic
// over measured times, like halving.h, so that every rank, fed the same agreed times, takes the
// same decisions.
#pragma once

#include <cstddef>
#include <map>
#include <vector>

namespace dltune::halving {

class CostModel {
 public:
  // A trainer for work `work_per_step` (its global batch) was built and warmed up in `seconds`
  // (data generation included when it was the first to need that data).
  void record_setup(double work_per_step, double seconds);
  // Group `group` ran `steps` steps of `work_per_step` in `seconds`.
  void record_steps(size_t group, double work_per_step, int steps, double seconds);

  // Seconds to build and warm up a trainer of `work_per_step`: the smallest of the recorded
  // set-ups scaled by the work ratio (never scaled down: set-up has fixed costs); 0 when none
  // is recorded.
  double setup_s(double work_per_step) const;
  // Seconds per step of `group`: its own latest measurement, else the measured group nearest
  // in work scaled by the work ratio; 0 when nothing is measured.
  double step_s(size_t group, double work_per_step) const;
  bool knows_setup() const { return !setups_.empty(); }

 private:
  struct Rate {
    double work = 0, step_s = 0;
  };
  std::vector<Rate> setups_;       // work, seconds of the whole set-up
  std::map<size_t, Rate> groups_;  // latest per group
};

}  // namespace dltune::halving
