#include "common/halving_cost.h"

#include <algorithm>
#include <cmath>

namespace dltune::halving {

void CostModel::record_setup(double work, double seconds) {
  if (work > 0 && seconds >= 0) setups_.push_back({work, seconds});
}

void CostModel::record_steps(size_t group, double work, int steps, double seconds) {
  if (work > 0 && steps > 0 && seconds > 0) groups_[group] = {work, seconds / steps};
}

double CostModel::setup_s(double work) const {
  double best = -1;
  for (const Rate& s : setups_) {
    const double e = s.step_s * std::max(1.0, work / s.work);
    if (best < 0 || e < best) best = e;
  }
  return std::max(0.0, best);
}

double CostModel::step_s(size_t group, double work) const {
  if (auto it = groups_.find(group); it != groups_.end()) return it->second.step_s;
  const Rate* near = nullptr;
  for (const auto& [g, r] : groups_) {
    if (near == nullptr ||
        std::fabs(std::log(r.work / work)) < std::fabs(std::log(near->work / work))) {
      near = &r;
    }
  }
  return near == nullptr ? 0.0 : near->step_s * work / near->work;
}

}  // namespace dltune::halving
