// Loads and stores of GCC vector values (`typedef float v8 __attribute__((vector_size(32)))`)
// at any alignment, for the kernels written with GCC's vector extension (conv_direct,
// conv3x3, norm): memcpy, which GCC turns into one unaligned vector move. And the choice
// between a kernel's builds: for AVX-512 (functions marked DLTUNE_AVX512, 16 floats per
// register), for AVX2 + FMA (DLTUNE_AVX2, 8 floats: x86-64-v3, this project's AMD Zen 3) and
// for the baseline x86-64 the library is compiled for (SSE, 4 floats). The CPU's features come
// from engine/core/cpu_features.h (so DLTUNE_CPU_MASK masks them for tests).
#pragma once

#include <cstdlib>
#include <cstring>

#include "engine/core/cpu_features.h"

// Compiles a function for x86-64-v4 (AVX-512 F/VL/BW/DQ); call it only where
// use_avx512_kernels() is true.
#define DLTUNE_AVX512 __attribute__((target("arch=x86-64-v4")))
// Compiles a function for x86-64-v3 (AVX2, FMA, F16C); call it only where use_avx2_kernels().
#define DLTUNE_AVX2 __attribute__((target("arch=x86-64-v3")))

// Vector values only pass between always-inlined helpers, so GCC's note that passing one by
// value differs between instruction sets' ABIs does not apply (in every file that includes
// this one).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace dltune::engine {

// *p as a V (sizeof(V) bytes from p).
template <class V>
[[gnu::always_inline]] inline V vload(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// sizeof(V) bytes at p <- v.
template <class V>
[[gnu::always_inline]] inline void vstore(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// Whether this CPU runs x86-64-v4 code (AVX-512 F, VL, BW and DQ), DLTUNE_CPU_MASK applied.
inline bool cpu_has_avx512() { return cpu_features().avx512; }

// Whether DLTUNE_KERNELS=generic asks for the baseline builds (the tests run them that way too).
inline bool generic_kernels_forced() {
  static const bool forced = [] {
    const char* env = std::getenv("DLTUNE_KERNELS");  // NOLINT: read once (common/env.h)
    return env != nullptr && std::strcmp(env, "generic") == 0;
  }();
  return forced;
}

// Whether the kernels run their AVX-512 build: where the CPU has it, unless
// DLTUNE_KERNELS=generic.
inline bool use_avx512_kernels() { return cpu_has_avx512() && !generic_kernels_forced(); }

// Whether the kernels run their AVX2 + FMA build (where there is no AVX-512 one to run, or the
// kernel has none): where the CPU has AVX2 and FMA, unless DLTUNE_KERNELS=generic.
inline bool use_avx2_kernels() {
  return cpu_features().avx2 && cpu_features().fma && !generic_kernels_forced();
}

}  // namespace dltune::engine
