// Shared helpers for the comm unit tests: integer-valued inputs and their serial reference.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "comm/types.h"

namespace dltune::comm::testing {

// Rank r's element i: small integers (exact in every type, sums far below 2^24).
inline double input_value(int rank, size_t i) {
  return static_cast<double>(static_cast<int64_t>((rank + 1) * (i % 97 + 1) % 1000) - 300);
}

template <typename T>
std::vector<T> make_input(int rank, size_t count) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>(input_value(rank, i));
  return v;
}

template <typename T>
std::vector<T> reference(int ranks, size_t count, ReduceOp op) {
  std::vector<T> out = make_input<T>(0, count);
  for (int r = 1; r < ranks; ++r) {
    std::vector<T> in = make_input<T>(r, count);
    for (size_t i = 0; i < count; ++i) {
      if (op == ReduceOp::kSum) out[i] += in[i];
      if (op == ReduceOp::kMax) out[i] = std::max(out[i], in[i]);
      if (op == ReduceOp::kMin) out[i] = std::min(out[i], in[i]);
    }
  }
  return out;
}

// A byte buffer holding `count` T at byte offset `misalign` from a 64-byte boundary.
template <typename T>
struct Buffer {
  Buffer(size_t count, size_t misalign) : bytes(count * sizeof(T) + 128), offset(misalign) {}
  void* data() { return bytes.data() + offset; }
  void fill(const std::vector<T>& v) {
    if (!v.empty()) std::memcpy(data(), v.data(), v.size() * sizeof(T));
  }
  std::vector<T> read(size_t count) {
    std::vector<T> v(count);
    if (count) std::memcpy(v.data(), data(), count * sizeof(T));
    return v;
  }
  std::vector<uint8_t> bytes;
  size_t offset;
};

}  // namespace dltune::comm::testing
