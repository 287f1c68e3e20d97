// Kernels of the sequence ops: attention's causal softmax and its gradient, and the token
// embedding's gather and scatter (contracts in kernels.h).
//
// Softmax: one warp per row of a (T, T) block; the row's maximum, sum and dot product are warp
// reductions, the formulas kernel_math.h's causal_softmax_row / causal_softmax_grad_row.
//
// Embedding backward is a scatter-add of n rows into the table at their ids. Atomics would make
// the sum's order (and its last bits) vary from run to run, so it is a sort instead, as
// PyTorch's deterministic path does: the positions are sorted by id with CUB's stable radix sort
// (keys: the clamped row, values: the position), and then each run of equal ids is one segment
// whose first position's block adds the segment's rows in position order (a thread per column)
// onto the table row: the CPU's order, hence the CPU's bits. Scratch: keys and positions in and
// out (4 n int32) and CUB's temporary storage.
#include <cub/device/device_radix_sort.cuh>

#include "engine/gpu/kernels.h"
#include "engine/gpu/kernels_util.cuh"

namespace dltune::engine::gpu::kernels {
namespace {

__global__ void causal_softmax_k(float* probs, int64_t rows, int t_len) {
  const int64_t row = warp_row();
  const int lane = lane_id();
  if (row >= rows) return;
  float* r = probs + row * t_len;
  const int t = static_cast<int>(row % t_len);
  float mx = -INFINITY;
  for (int s = lane; s <= t; s += kWarp) mx = fmaxf(mx, r[s]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int s = lane; s <= t; s += kWarp) {
    const float e = expf(r[s] - mx);
    r[s] = e;
    sum += e;
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int s = lane; s < t_len; s += kWarp) r[s] = s <= t ? r[s] * inv : 0.0f;
}

__global__ void causal_softmax_grad_k(const float* p, int64_t p_stride, float* dp, int members,
                                      int t_len, float scale) {
  const int64_t row = warp_row();
  const int lane = lane_id();
  if (row >= int64_t{members} * t_len) return;
  const int64_t member = row / t_len;
  const int t = static_cast<int>(row % t_len);
  const float* pr = p + member * p_stride + int64_t{t} * t_len;
  float* dr = dp + row * t_len;
  float dot = 0.0f;
  for (int s = lane; s <= t; s += kWarp) dot += dr[s] * pr[s];
  dot = warp_sum(dot);
  for (int s = lane; s < t_len; s += kWarp) dr[s] = s <= t ? pr[s] * (dr[s] - dot) * scale : 0.0f;
}

__global__ void embedding_forward_k(const float* ids, const float* table, float* out, int64_t n,
                                    int c, int64_t vocab) {
  DLTUNE_GRID_STRIDE(i, n * c) {
    const int64_t pos = i / c, col = i % c;
    out[i] = table[math::embedding_row(ids[pos], vocab) * c + col];
  }
}

__global__ void embedding_keys_k(const float* ids, int64_t n, int64_t vocab, int32_t* keys,
                                 int32_t* positions) {
  DLTUNE_GRID_STRIDE(i, n) {
    keys[i] = static_cast<int32_t>(math::embedding_row(ids[i], vocab));
    positions[i] = static_cast<int32_t>(i);
  }
}

// Grid (n, ceil(C / kThreads)): block k adds the segment starting at sorted position k (if one
// starts there) onto its table row, a thread per column.
__global__ void embedding_segments_k(const int32_t* keys, const int32_t* positions,
                                     const float* dout, float* table, int64_t n, int c) {
  const int64_t k = blockIdx.x;
  const int32_t key = keys[k];
  if (k > 0 && keys[k - 1] == key) return;
  const int col = static_cast<int>(blockIdx.y) * kThreads + static_cast<int>(threadIdx.x);
  if (col >= c) return;
  float* cell = table + int64_t{key} * c + col;
  float s = *cell;
  for (int64_t j = k; j < n && keys[j] == key; ++j) s += dout[int64_t{positions[j]} * c + col];
  *cell = s;
}

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

int key_bits(int64_t vocab) {
  int b = 1;
  while (b < 31 && (int64_t{1} << b) < vocab) ++b;
  return b;
}

size_t cub_bytes(int64_t n, int64_t vocab) {
  size_t bytes = 0;
  (void)cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(n), 0,
      key_bits(vocab));
  return bytes;
}

}  // namespace

void causal_softmax(float* probs, int64_t rows, int t, cudaStream_t s) {
  if (rows > 0) causal_softmax_k<<<blocks_for_rows(rows), kThreads, 0, s>>>(probs, rows, t);
}

void causal_softmax_grad(const float* p, int64_t p_stride, float* dp, int members, int t,
                         float scale, cudaStream_t s) {
  const int64_t rows = int64_t{members} * t;
  if (rows > 0)
    causal_softmax_grad_k<<<blocks_for_rows(rows), kThreads, 0, s>>>(p, p_stride, dp, members, t,
                                                                     scale);
}

void embedding_forward(const float* ids, const float* table, float* out, int64_t n, int c,
                       int64_t vocab, cudaStream_t s) {
  if (n > 0 && c > 0)
    embedding_forward_k<<<blocks_for(n * c), kThreads, 0, s>>>(ids, table, out, n, c, vocab);
}

size_t embedding_scratch_bytes(int64_t n, int64_t vocab) {
  return 4 * aligned(sizeof(int32_t) * static_cast<size_t>(n)) + aligned(cub_bytes(n, vocab));
}

cudaError_t embedding_backward(const float* ids, const float* dout, float* dtable, int64_t n, int c,
                               int64_t vocab, bool acc, void* scratch, size_t scratch_bytes,
                               cudaStream_t s) {
  if (!acc) {
    const cudaError_t e =
        cudaMemsetAsync(dtable, 0, sizeof(float) * static_cast<size_t>(vocab * c), s);
    if (e != cudaSuccess) return e;
  }
  if (n <= 0 || c <= 0) return cudaSuccess;
  if (scratch_bytes < embedding_scratch_bytes(n, vocab)) return cudaErrorInvalidValue;
  const size_t slot = aligned(sizeof(int32_t) * static_cast<size_t>(n));
  auto* base = static_cast<char*>(scratch);
  auto* keys = reinterpret_cast<int32_t*>(base);
  auto* keys_sorted = reinterpret_cast<int32_t*>(base + slot);
  auto* pos = reinterpret_cast<int32_t*>(base + 2 * slot);
  auto* pos_sorted = reinterpret_cast<int32_t*>(base + 3 * slot);
  size_t temp_bytes = scratch_bytes - 4 * slot;
  embedding_keys_k<<<blocks_for(n), kThreads, 0, s>>>(ids, n, vocab, keys, pos);
  const cudaError_t e =
      cub::DeviceRadixSort::SortPairs(base + 4 * slot, temp_bytes, keys, keys_sorted, pos,
                                      pos_sorted, static_cast<int>(n), 0, key_bits(vocab), s);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>((c + kThreads - 1) / kThreads));
  embedding_segments_k<<<grid, kThreads, 0, s>>>(keys_sorted, pos_sorted, dout, dtable, n, c);
  return cudaSuccess;
}

}  // namespace dltune::engine::gpu::kernels
