// Element-wise reduction kernels used by every algorithm. Plain loops the compiler vectorises
// (this file is built with -O3; no -march assumptions, so SSE2 everywhere and whatever the
// default target allows).
#pragma once

#include <cstddef>

#include "comm/types.h"

namespace dltune::comm {

// dst[i] = a[i] op b[i] for i < count. dst may be the same pointer as a or b (not a partial
// overlap). Pointers need no alignment: misaligned ones take a slower element-copy path.
void reduce(DataType type, ReduceOp op, void* dst, const void* a, const void* b, size_t count);

// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i], left to right; n >= 1. dst must
// not overlap any source (except being srcs[0] itself).
void reduce_many(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                 size_t count);

}  // namespace dltune::comm
