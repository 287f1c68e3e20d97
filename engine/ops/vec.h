// Loads and stores of GCC vector values (`typedef float v8 __attribute__((vector_size(32)))`)
// at any alignment, for the kernels written with GCC's vector extension (conv_direct,
// conv3x3, norm): memcpy, which GCC turns into one unaligned vector move. And the choice
// between a kernel's two builds: for AVX-512 (functions marked DLTUNE_AVX512, 16 floats per
// register) and for the baseline x86-64 the library is compiled for (SSE, 4 floats).
#pragma once

#include <cstdlib>
#include <cstring>

// Compiles a function for x86-64-v4 (AVX-512 F/VL/BW/DQ); call it only where
// use_avx512_kernels() is true.
#define DLTUNE_AVX512 __attribute__((target("arch=x86-64-v4")))

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

// Whether this CPU runs x86-64-v4 code (AVX-512 F, VL, BW and DQ).
inline bool cpu_has_avx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  }();
  return has;
}

// Whether the kernels run their AVX-512 build: where the CPU has it, unless the environment
// sets DLTUNE_KERNELS=generic (the tests run the baseline build that way too).
inline bool use_avx512_kernels() {
  static const bool use = [] {
    const char* env = std::getenv("DLTUNE_KERNELS");  // NOLINT: read once
    return cpu_has_avx512() && !(env != nullptr && std::strcmp(env, "generic") == 0);
  }();
  return use;
}

}  // namespace dltune::engine
