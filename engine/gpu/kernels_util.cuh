// Launch helpers shared by kernels*.cu (internal to them): grid sizes for grid-stride loops,
// warp-per-row launches and warp / block reductions.
//
// Every kernel either walks its elements with GRID_STRIDE (so any n works with a capped grid) or
// gives each warp one row (rows_per_block() rows per block of kThreads; the row index is
// warp-uniform, so a warp that has no row returns as a whole and the shuffles below always run
// with all 32 lanes).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace dltune::engine::gpu::kernels {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int64_t kMaxBlocks = 65536;

inline int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  return static_cast<int>(b > kMaxBlocks ? kMaxBlocks : b);
}

// Blocks for one warp per row: rows / (kThreads / 32), at least 1. Rows beyond 2^31 - 1 blocks
// of 8 do not occur (the callers' row counts are below 2^34).
inline int blocks_for_rows(int64_t rows) {
  const int64_t per = kThreads / kWarp;
  const int64_t b = (rows + per - 1) / per;
  return static_cast<int>(b < 1 ? 1 : b);
}

#define DLTUNE_GRID_STRIDE(i, n)                                                         \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// The row of the calling warp in a warp-per-row launch, and the lane.
__device__ inline int64_t warp_row() {
  return (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarp;
}
__device__ inline int lane_id() { return static_cast<int>(threadIdx.x % kWarp); }

template <typename T>
__device__ inline T warp_sum(T v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum of v over the block (blockDim.x == kThreads, 1-D), in a fixed tree order; every thread
// must call it; every thread gets the result. `shared` holds kThreads values (it may be reused by
// the next call: the first barrier waits until everyone has read this one's result).
template <typename T>
__device__ inline T block_sum(T v, T* shared) {
  __syncthreads();
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

}  // namespace dltune::engine::gpu::kernels
