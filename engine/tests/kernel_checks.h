// Test helpers for the hand-written kernels' checks (conv3x3_test, conv_winograd_test).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include <gtest/gtest.h>

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

// n floats drawn uniformly from [-1, 1).
inline std::vector<float> random_vector(size_t n, std::mt19937* rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(*rng);
  return v;
}

// Every got[i] within 1e-5 of want[i], relative to the largest |want| (at least 1).
inline void expect_near_all(const std::vector<float>& got, const std::vector<double>& want,
                            const char* what) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 0.0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0, scale)) << what << " element " << i;
}

}  // namespace dltune::engine::test
