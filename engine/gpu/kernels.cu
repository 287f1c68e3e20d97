// The engine's element-wise, pooling, LRN, loss and optimizer kernels (contracts in kernels.h).
//
// Deliberately simple: one thread per output element in grid-stride loops (any size works with a
// capped grid), the math in kernel_math.h shared with the host-side test, one warp per row for
// the softmax. Backward passes gather (each thread owns the gradient element it writes), so no
// kernel here uses atomics and every result is reproducible to the bit. The clip norm is a
// two-pass reduction in double: kNormParts block partials, then one block adds them in order.
#include "engine/core/counter_hash.h"
#include "engine/gpu/kernels.h"
#include "engine/gpu/kernels_util.cuh"

namespace dltune::engine::gpu::kernels {
namespace {

__global__ void fill_rows_k(float* out, const float* row, int64_t n, int cols) {
  DLTUNE_GRID_STRIDE(i, n) out[i] = row[i % cols];
}

__global__ void fill_k(float* out, float value, int64_t n) {
  DLTUNE_GRID_STRIDE(i, n) out[i] = value;
}

__global__ void add2_k(const float* a, const float* b, float* out, int64_t n) {
  DLTUNE_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void add_to_k(float* out, const float* x, int64_t n) {
  DLTUNE_GRID_STRIDE(i, n) out[i] += x[i];
}

__global__ void copy_rows_k(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch,
                            int64_t rows, int64_t width, bool acc) {
  DLTUNE_GRID_STRIDE(i, rows * width) {
    const int64_t r = i / width, c = i % width;
    const float v = src[r * src_pitch + c];
    float* d = dst + r * dst_pitch + c;
    *d = acc ? *d + v : v;
  }
}

__global__ void relu_forward_k(const float* x, float* y, int64_t n) {
  DLTUNE_GRID_STRIDE(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void relu_backward_k(const float* y, const float* dy, float* dx, int64_t n, bool acc) {
  DLTUNE_GRID_STRIDE(i, n) {
    const float g = y[i] > 0.0f ? dy[i] : 0.0f;
    dx[i] = acc ? dx[i] + g : g;
  }
}

__global__ void gelu_forward_k(const float* x, float* y, int64_t n) {
  DLTUNE_GRID_STRIDE(i, n) y[i] = math::gelu(x[i]);
}

__global__ void gelu_backward_k(const float* x, const float* dy, float* dx, int64_t n, bool acc) {
  DLTUNE_GRID_STRIDE(i, n) {
    const float g = math::gelu_grad(x[i], dy[i]);
    dx[i] = acc ? dx[i] + g : g;
  }
}

__global__ void dropout_forward_k(const float* x, float* y, float* mask, int64_t n, uint64_t seed,
                                  float p, float scale) {
  DLTUNE_GRID_STRIDE(i, n) {
    const float m = counter_uniform(seed, static_cast<uint64_t>(i)) < p ? 0.0f : scale;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ void dropout_backward_k(const float* dy, const float* mask, float* dx, int64_t n,
                                   bool acc) {
  DLTUNE_GRID_STRIDE(i, n) {
    const float g = dy[i] * mask[i];
    dx[i] = acc ? dx[i] + g : g;
  }
}

__global__ void pool_forward_k(const float* x, float* y, int32_t* arg, PoolShape p, int64_t n) {
  DLTUNE_GRID_STRIDE(i, n) {
    int32_t a = -1;
    y[i] = math::pool_forward_at(p, x, i, &a);
    if (p.mode == math::PoolMode::kMax) arg[i] = a;
  }
}

__global__ void pool_backward_k(const float* dy, const int32_t* arg, float* dx, PoolShape p,
                                int64_t n, bool acc) {
  DLTUNE_GRID_STRIDE(i, n) dx[i] = math::pool_backward_at(p, dy, arg, i, acc ? dx[i] : 0.0f);
}

__global__ void pad_forward_k(const float* x, float* y, PadShape p, int64_t n) {
  DLTUNE_GRID_STRIDE(i, n) y[i] = math::pad_forward_at(p, x, i);
}

__global__ void pad_backward_k(const float* dy, float* dx, PadShape p, int64_t n, bool acc) {
  DLTUNE_GRID_STRIDE(i, n) dx[i] = math::pad_backward_at(p, dy, i, acc ? dx[i] : 0.0f);
}

__global__ void lrn_forward_k(const float* x, float* y, float* scale, LrnShape l) {
  const int64_t n = static_cast<int64_t>(l.batch) * l.c * l.hw;
  const int lo = l.size / 2, hi = (l.size - 1) / 2;
  const float a = l.alpha / static_cast<float>(l.size);
  DLTUNE_GRID_STRIDE(i, n) {
    const int64_t pix = i % l.hw;
    const int c = static_cast<int>((i / l.hw) % l.c);
    const int64_t base = (i / (l.hw * l.c)) * l.c * l.hw + pix;
    float s = 0.0f;
    for (int j = max(0, c - lo); j <= min(l.c - 1, c + hi); ++j) {
      const float v = x[base + j * l.hw];
      s += v * v;
    }
    s = l.k + a * s;
    scale[i] = s;
    y[i] = x[i] * powf(s, -l.beta);
  }
}

// dx_c = dy_c s_c^-beta - (2 alpha beta / size) x_c sum_{j in [c-hi, c+lo]} dy_j y_j / s_j
__global__ void lrn_backward_k(const float* x, const float* y, const float* dy, const float* scale,
                               float* dx, LrnShape l, bool acc) {
  const int64_t n = static_cast<int64_t>(l.batch) * l.c * l.hw;
  const int lo = l.size / 2, hi = (l.size - 1) / 2;
  const float f = 2.0f * l.alpha * l.beta / static_cast<float>(l.size);
  DLTUNE_GRID_STRIDE(i, n) {
    const int64_t pix = i % l.hw;
    const int c = static_cast<int>((i / l.hw) % l.c);
    const int64_t base = (i / (l.hw * l.c)) * l.c * l.hw + pix;
    float r = 0.0f;
    for (int j = max(0, c - hi); j <= min(l.c - 1, c + lo); ++j) {
      const int64_t o = base + j * l.hw;
      r += dy[o] * y[o] / scale[o];
    }
    const float g = dy[i] * powf(scale[i], -l.beta) - f * x[i] * r;
    dx[i] = acc ? dx[i] + g : g;
  }
}

__global__ void position_forward_k(const float* x, const float* table, float* y, int64_t n,
                                   int64_t tc) {
  DLTUNE_GRID_STRIDE(i, n) y[i] = x[i] + table[i % tc];
}

// One thread per table element: the batch's terms in sample order (the CPU's order).
__global__ void position_backward_k(const float* dy, float* dtable, int batch, int64_t tc,
                                    bool acc) {
  DLTUNE_GRID_STRIDE(i, tc) {
    float s = acc ? dtable[i] : 0.0f;
    for (int b = 0; b < batch; ++b) s += dy[b * tc + i];
    dtable[i] = s;
  }
}

// One warp per row; doubles for the sum and the log, as the CPU loss.
__global__ void softmax_xent_k(const float* logits, const int32_t* labels, int batch, int classes,
                               float inv, float* dlogits, double* row_loss) {
  const int64_t row = warp_row();
  const int lane = lane_id();
  if (row >= batch) return;
  const float* z = logits + row * classes;
  float mx = -INFINITY;
  for (int k = lane; k < classes; k += kWarp) mx = fmaxf(mx, z[k]);
  mx = warp_max(mx);
  double sum = 0.0;
  for (int k = lane; k < classes; k += kWarp) sum += exp(static_cast<double>(z[k] - mx));
  sum = warp_sum(sum);
  const double log_sum = log(sum);
  const int y = labels[row];
  if (lane == 0) row_loss[row] = log_sum - static_cast<double>(z[y] - mx);
  if (!dlogits) return;
  float* d = dlogits + row * classes;
  for (int k = lane; k < classes; k += kWarp) {
    const float v = static_cast<float>(exp(static_cast<double>(z[k] - mx) - log_sum)) * inv;
    d[k] = k == y ? v - inv : v;
  }
}

__global__ void sgd_step_k(float* w, const float* g, float* v, int64_t n, float lr, float mu,
                           float wd) {
  DLTUNE_GRID_STRIDE(i, n) math::sgd_update(&w[i], g[i], &v[i], lr, mu, wd);
}

__global__ void adamw_step_k(float* w, const float* g, float* m, float* v, int64_t n,
                             math::AdamwScalars k) {
  DLTUNE_GRID_STRIDE(i, n) math::adamw_update(&w[i], g[i], &m[i], &v[i], k);
}

// Pass 1: block b's sum of squares over its grid-stride share (gridDim.x == kNormParts).
__global__ void sumsq_parts_k(const float* g, int64_t n, double* parts) {
  __shared__ double sh[kThreads];
  double s = 0.0;
  DLTUNE_GRID_STRIDE(i, n) s += static_cast<double>(g[i]) * g[i];
  s = block_sum(s, sh);
  if (threadIdx.x == 0) parts[blockIdx.x] = s;
}

// Pass 2 (one block): the parts in a fixed order into out.
__global__ void sum_parts_k(const double* parts, int count, double* out) {
  __shared__ double sh[kThreads];
  double s = 0.0;
  for (int i = threadIdx.x; i < count; i += kThreads) s += parts[i];
  s = block_sum(s, sh);
  if (threadIdx.x == 0) *out = s;
}

__global__ void clip_scale_k(float* g, int64_t n, const double* sumsq, double max_norm) {
  const float coef = math::clip_coef(*sumsq, max_norm);
  if (coef == 1.0f) return;
  DLTUNE_GRID_STRIDE(i, n) g[i] *= coef;
}

}  // namespace

void fill_rows(float* out, const float* row, int64_t rows, int cols, cudaStream_t s) {
  const int64_t n = rows * cols;
  if (n > 0) fill_rows_k<<<blocks_for(n), kThreads, 0, s>>>(out, row, n, cols);
}
void fill(float* out, float value, int64_t n, cudaStream_t s) {
  if (n > 0) fill_k<<<blocks_for(n), kThreads, 0, s>>>(out, value, n);
}
void store_grad(float* dst, const float* src, int64_t n, bool acc, cudaStream_t s) {
  if (n <= 0) return;
  if (acc) {
    add_to_k<<<blocks_for(n), kThreads, 0, s>>>(dst, src, n);
  } else if (dst != src) {
    cudaMemcpyAsync(dst, src, sizeof(float) * static_cast<size_t>(n), cudaMemcpyDeviceToDevice, s);
  }
}
void add2(const float* a, const float* b, float* out, int64_t n, cudaStream_t s) {
  if (n > 0) add2_k<<<blocks_for(n), kThreads, 0, s>>>(a, b, out, n);
}
void add_to(float* out, const float* x, int64_t n, cudaStream_t s) {
  if (n > 0) add_to_k<<<blocks_for(n), kThreads, 0, s>>>(out, x, n);
}
void copy_rows(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch, int64_t rows,
               int64_t width, bool acc, cudaStream_t s) {
  const int64_t n = rows * width;
  if (n > 0)
    copy_rows_k<<<blocks_for(n), kThreads, 0, s>>>(dst, dst_pitch, src, src_pitch, rows, width,
                                                   acc);
}
void relu_forward(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) relu_forward_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
}
void relu_backward(const float* y, const float* dy, float* dx, int64_t n, bool acc,
                   cudaStream_t s) {
  if (n > 0) relu_backward_k<<<blocks_for(n), kThreads, 0, s>>>(y, dy, dx, n, acc);
}
void gelu_forward(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) gelu_forward_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
}
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n, bool acc,
                   cudaStream_t s) {
  if (n > 0) gelu_backward_k<<<blocks_for(n), kThreads, 0, s>>>(x, dy, dx, n, acc);
}
void dropout_forward(const float* x, float* y, float* mask, int64_t n, uint64_t seed, float p,
                     cudaStream_t s) {
  if (n > 0)
    dropout_forward_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, mask, n, seed, p, 1.0f / (1.0f - p));
}
void dropout_backward(const float* dy, const float* mask, float* dx, int64_t n, bool acc,
                      cudaStream_t s) {
  if (n > 0) dropout_backward_k<<<blocks_for(n), kThreads, 0, s>>>(dy, mask, dx, n, acc);
}
void pool_forward(const float* x, float* y, int32_t* argmax, const PoolShape& p, cudaStream_t s) {
  const int64_t n = int64_t{p.planes} * p.oh * p.ow;
  if (n > 0) pool_forward_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, argmax, p, n);
}
void pool_backward(const float* dy, const int32_t* argmax, float* dx, const PoolShape& p, bool acc,
                   cudaStream_t s) {
  const int64_t n = int64_t{p.planes} * p.h * p.w;
  if (n > 0) pool_backward_k<<<blocks_for(n), kThreads, 0, s>>>(dy, argmax, dx, p, n, acc);
}
void pad_forward(const float* x, float* y, const PadShape& p, int batch, cudaStream_t s) {
  const int64_t n = int64_t{batch} * p.oc * p.oh * p.ow;
  if (n > 0) pad_forward_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, p, n);
}
void pad_backward(const float* dy, float* dx, const PadShape& p, int batch, bool acc,
                  cudaStream_t s) {
  const int64_t n = int64_t{batch} * p.c * p.h * p.w;
  if (n > 0) pad_backward_k<<<blocks_for(n), kThreads, 0, s>>>(dy, dx, p, n, acc);
}
void lrn_forward(const float* x, float* y, float* scale, const LrnShape& l, cudaStream_t s) {
  const int64_t n = int64_t{l.batch} * l.c * l.hw;
  if (n > 0) lrn_forward_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, scale, l);
}
void lrn_backward(const float* x, const float* y, const float* dy, const float* scale, float* dx,
                  const LrnShape& l, bool acc, cudaStream_t s) {
  const int64_t n = int64_t{l.batch} * l.c * l.hw;
  if (n > 0) lrn_backward_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, dy, scale, dx, l, acc);
}
void position_forward(const float* x, const float* table, float* y, int batch, int64_t tc,
                      cudaStream_t s) {
  const int64_t n = int64_t{batch} * tc;
  if (n > 0) position_forward_k<<<blocks_for(n), kThreads, 0, s>>>(x, table, y, n, tc);
}
void position_backward(const float* dy, float* dtable, int batch, int64_t tc, bool acc,
                       cudaStream_t s) {
  if (tc > 0) position_backward_k<<<blocks_for(tc), kThreads, 0, s>>>(dy, dtable, batch, tc, acc);
}
void softmax_xent(const float* logits, const int32_t* labels, int batch, int classes, float denom,
                  float* dlogits, double* row_loss, cudaStream_t s) {
  if (batch > 0)
    softmax_xent_k<<<blocks_for_rows(batch), kThreads, 0, s>>>(logits, labels, batch, classes,
                                                               1.0f / denom, dlogits, row_loss);
}
void sgd_step(float* params, const float* grads, float* velocity, int64_t n, float lr, float mu,
              float wd, cudaStream_t s) {
  if (n > 0) sgd_step_k<<<blocks_for(n), kThreads, 0, s>>>(params, grads, velocity, n, lr, mu, wd);
}
void adamw_step(float* params, const float* grads, float* m, float* v, int64_t n,
                const math::AdamwScalars& k, cudaStream_t s) {
  if (n > 0) adamw_step_k<<<blocks_for(n), kThreads, 0, s>>>(params, grads, m, v, n, k);
}
void clip_grad_norm(float* grads, int64_t n, double max_norm, double* scratch, cudaStream_t s) {
  // The grid of pass 1 is always kNormParts blocks (a grid-stride loop covers any n), so the
  // reduction order, and with it the result, depends on n alone.
  sumsq_parts_k<<<kNormParts, kThreads, 0, s>>>(grads, n, scratch);
  sum_parts_k<<<1, kThreads, 0, s>>>(scratch, kNormParts, scratch + kNormParts);
  if (n > 0)
    clip_scale_k<<<blocks_for(n), kThreads, 0, s>>>(grads, n, scratch + kNormParts, max_norm);
}

}  // namespace dltune::engine::gpu::kernels
