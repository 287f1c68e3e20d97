// Test helpers for the hand-written kernels' checks (conv3x3_test, conv_winograd_test).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace dltune::engine::test {

// A buffer of n floats with kGuard sentinels on each side: the kernels store with vector (and
// masked vector) stores, which the sanitizers do not always see, so a test checks itself that
// nothing outside the tensor was written.
struct Guarded {
  static constexpr size_t kGuard = 64;
  static constexpr float kSentinel = 12345.0f;
  std::vector<float> all;
  Guarded(size_t n, float fill) : all(n + 2 * kGuard, kSentinel) {
    std::fill(all.begin() + kGuard, all.end() - kGuard, fill);
  }
  float* data() { return all.data() + kGuard; }
  std::vector<float> inner() const { return {all.begin() + kGuard, all.end() - kGuard}; }
  bool guards_intact() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (all[i] != kSentinel || all[all.size() - 1 - i] != kSentinel) return false;
    return true;
  }
};

}  // namespace dltune::engine::test
