// Loads and stores of GCC vector values (`typedef float v8 __attribute__((vector_size(32)))`)
// at any alignment, for the kernels written with GCC's vector extension (conv_direct,
// conv3x3, norm): memcpy, which GCC turns into one unaligned vector move.
#pragma once

#include <cstring>

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

}  // namespace dltune::engine
