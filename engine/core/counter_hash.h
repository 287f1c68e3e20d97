// A counter-based random stream: the value for element i depends only on (seed, i), so the CPU
// dropout layer and the GPU dropout kernel draw exactly the same mask for the same seed, in any
// order and on any number of threads. Shared by engine/ops/elementwise.cc and
// engine/gpu/kernels.cu.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DLTUNE_HOST_DEVICE __host__ __device__
#else
#define DLTUNE_HOST_DEVICE
#endif

namespace dltune::engine {

// splitmix64's finaliser over seed + (i + 1) * golden ratio: one full avalanche per element.
DLTUNE_HOST_DEVICE inline uint64_t counter_hash(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 random bits (exactly representable in float, same on both sides).
DLTUNE_HOST_DEVICE inline float counter_uniform(uint64_t seed, uint64_t i) {
  return static_cast<float>(counter_hash(seed, i) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace dltune::engine
