#include "comm/reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace dltune::comm {
namespace {

struct Sum {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      // Wrap around on overflow, as MPI implementations do, instead of undefined behaviour.
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};
struct Max {
  template <typename T>
  static T apply(T a, T b) {
    return a < b ? b : a;
  }
};
struct Min {
  template <typename T>
  static T apply(T a, T b) {
    return b < a ? b : a;
  }
};

template <typename T>
bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(T) == 0;
}

template <typename T, typename Op>
void reduce_typed(void* dst, const void* a, const void* b, size_t count) {
  if (aligned<T>(dst) && aligned<T>(a) && aligned<T>(b)) {
    T* d = static_cast<T*>(dst);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    for (size_t i = 0; i < count; ++i) d[i] = Op::apply(x[i], y[i]);
    return;
  }
  auto* d = static_cast<unsigned char*>(dst);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  for (size_t i = 0; i < count; ++i) {
    T u, v;
    std::memcpy(&u, x + i * sizeof(T), sizeof(T));
    std::memcpy(&v, y + i * sizeof(T), sizeof(T));
    u = Op::apply(u, v);
    std::memcpy(d + i * sizeof(T), &u, sizeof(T));
  }
}

template <typename Op>
void reduce_op(DataType type, void* dst, const void* a, const void* b, size_t count) {
  switch (type) {
    case DataType::kF32:
      return reduce_typed<float, Op>(dst, a, b, count);
    case DataType::kF64:
      return reduce_typed<double, Op>(dst, a, b, count);
    case DataType::kI32:
      return reduce_typed<int32_t, Op>(dst, a, b, count);
    case DataType::kI64:
      return reduce_typed<int64_t, Op>(dst, a, b, count);
  }
}

}  // namespace

void reduce(DataType type, ReduceOp op, void* dst, const void* a, const void* b, size_t count) {
  switch (op) {
    case ReduceOp::kSum:
      return reduce_op<Sum>(type, dst, a, b, count);
    case ReduceOp::kMax:
      return reduce_op<Max>(type, dst, a, b, count);
    case ReduceOp::kMin:
      return reduce_op<Min>(type, dst, a, b, count);
  }
}

void reduce_many(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                 size_t count) {
  if (n == 1) {
    if (dst != srcs[0]) std::memcpy(dst, srcs[0], count * dtype_size(type));
    return;
  }
  reduce(type, op, dst, srcs[0], srcs[1], count);
  for (int k = 2; k < n; ++k) reduce(type, op, dst, dst, srcs[k], count);
}

}  // namespace dltune::comm
