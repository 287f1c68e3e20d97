// The engine's own CUDA kernels (see kernels.h for the contracts). Deliberately simple:
// grid-stride loops, one thread per output element, one warp per row for the softmax.
#include "engine/gpu/counter_hash.h"
#include "engine/gpu/kernels.h"

namespace dltune::engine::gpu::kernels {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  return static_cast<int>(b > 65536 ? 65536 : b);
}

#define GRID_STRIDE(i, n)                                                                \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

__global__ void fill_rows_k(float* out, const float* row, int64_t n, int cols) {
  GRID_STRIDE(i, n) out[i] = row[i % cols];
}

__global__ void col_sum_k(const float* x, int rows, int cols, float* out) {
  GRID_STRIDE(c, cols) {
    float s = 0.0f;
    for (int r = 0; r < rows; ++r) s += x[static_cast<int64_t>(r) * cols + c];
    out[c] = s;
  }
}

__global__ void relu_forward_k(const float* x, float* y, int64_t n) {
  GRID_STRIDE(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void relu_backward_k(const float* y, const float* dy, float* dx, int64_t n) {
  GRID_STRIDE(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void dropout_forward_k(const float* x, float* y, float* mask, int64_t n, uint64_t seed,
                                  float p, float scale) {
  GRID_STRIDE(i, n) {
    const float m = counter_uniform(seed, static_cast<uint64_t>(i)) < p ? 0.0f : scale;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ void multiply_k(const float* a, const float* b, float* out, int64_t n) {
  GRID_STRIDE(i, n) out[i] = a[i] * b[i];
}

__global__ void maxpool_forward_k(const float* x, float* y, int32_t* arg, PoolShape p) {
  const int64_t n = static_cast<int64_t>(p.planes) * p.oh * p.ow;
  GRID_STRIDE(i, n) {
    const int ow = static_cast<int>(i % p.ow);
    const int oh = static_cast<int>((i / p.ow) % p.oh);
    const int64_t plane = i / (static_cast<int64_t>(p.ow) * p.oh);
    const float* src = x + plane * p.h * p.w;
    const int h0 = oh * p.stride - p.pad, w0 = ow * p.stride - p.pad;
    const int h1 = min(h0 + p.k, p.h), w1 = min(w0 + p.k, p.w);
    float best = -INFINITY;
    int32_t bi = -1;
    for (int h = max(h0, 0); h < h1; ++h)
      for (int w = max(w0, 0); w < w1; ++w) {
        const float v = src[h * p.w + w];
        if (v > best || bi < 0) best = v, bi = h * p.w + w;
      }
    y[i] = best;
    arg[i] = bi;
  }
}

__global__ void maxpool_backward_k(const float* dy, const int32_t* arg, float* dx, PoolShape p) {
  const int64_t n = static_cast<int64_t>(p.planes) * p.oh * p.ow;
  GRID_STRIDE(i, n) {
    const int64_t plane = i / (static_cast<int64_t>(p.ow) * p.oh);
    atomicAdd(dx + plane * p.h * p.w + arg[i], dy[i]);
  }
}

__global__ void avgpool_forward_k(const float* x, float* y, PoolShape p) {
  const int64_t n = static_cast<int64_t>(p.planes) * p.oh * p.ow;
  const float inv = 1.0f / static_cast<float>(p.k * p.k);
  GRID_STRIDE(i, n) {
    const int ow = static_cast<int>(i % p.ow);
    const int oh = static_cast<int>((i / p.ow) % p.oh);
    const int64_t plane = i / (static_cast<int64_t>(p.ow) * p.oh);
    const float* src = x + plane * p.h * p.w;
    const int h0 = oh * p.stride - p.pad, w0 = ow * p.stride - p.pad;
    const int h1 = min(h0 + p.k, p.h), w1 = min(w0 + p.k, p.w);
    float s = 0.0f;
    for (int h = max(h0, 0); h < h1; ++h)
      for (int w = max(w0, 0); w < w1; ++w) s += src[h * p.w + w];
    y[i] = s * inv;
  }
}

// Gather form (no atomics): input pixel (h, w) receives from every window that covers it.
__global__ void avgpool_backward_k(const float* dy, float* dx, PoolShape p) {
  const int64_t n = static_cast<int64_t>(p.planes) * p.h * p.w;
  const float inv = 1.0f / static_cast<float>(p.k * p.k);
  GRID_STRIDE(i, n) {
    const int w = static_cast<int>(i % p.w);
    const int h = static_cast<int>((i / p.w) % p.h);
    const int64_t plane = i / (static_cast<int64_t>(p.w) * p.h);
    const float* d = dy + plane * p.oh * p.ow;
    // windows oh with oh*stride - pad <= h < oh*stride - pad + k
    const int hp = h + p.pad, wp = w + p.pad;
    const int oh_lo = hp >= p.k ? (hp - p.k) / p.stride + 1 : 0;
    const int ow_lo = wp >= p.k ? (wp - p.k) / p.stride + 1 : 0;
    const int oh_hi = min(p.oh - 1, hp / p.stride), ow_hi = min(p.ow - 1, wp / p.stride);
    float s = 0.0f;
    for (int oh = oh_lo; oh <= oh_hi; ++oh)
      for (int ow = ow_lo; ow <= ow_hi; ++ow) s += d[oh * p.ow + ow];
    dx[i] = s * inv;
  }
}

__global__ void lrn_forward_k(const float* x, float* y, float* scale, LrnShape l) {
  const int64_t n = static_cast<int64_t>(l.batch) * l.c * l.hw;
  const int lo = l.size / 2, hi = (l.size - 1) / 2;
  const float a = l.alpha / static_cast<float>(l.size);
  GRID_STRIDE(i, n) {
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
                               float* dx, LrnShape l) {
  const int64_t n = static_cast<int64_t>(l.batch) * l.c * l.hw;
  const int lo = l.size / 2, hi = (l.size - 1) / 2;
  const float f = 2.0f * l.alpha * l.beta / static_cast<float>(l.size);
  GRID_STRIDE(i, n) {
    const int64_t pix = i % l.hw;
    const int c = static_cast<int>((i / l.hw) % l.c);
    const int64_t base = (i / (l.hw * l.c)) * l.c * l.hw + pix;
    float r = 0.0f;
    for (int j = max(0, c - hi); j <= min(l.c - 1, c + lo); ++j) {
      const int64_t o = base + j * l.hw;
      r += dy[o] * y[o] / scale[o];
    }
    dx[i] = dy[i] * powf(scale[i], -l.beta) - f * x[i] * r;
  }
}

// One warp per row; doubles for the sum and the log, as the CPU loss.
__global__ void softmax_xent_k(const float* logits, const int32_t* labels, int batch, int classes,
                               float inv, float* dlogits, double* row_loss) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= batch) return;
  const float* z = logits + static_cast<int64_t>(warp) * classes;
  float mx = -INFINITY;
  for (int k = lane; k < classes; k += 32) mx = fmaxf(mx, z[k]);
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  double sum = 0.0;
  for (int k = lane; k < classes; k += 32) sum += exp(static_cast<double>(z[k] - mx));
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const double log_sum = log(sum);
  const int y = labels[warp];
  if (lane == 0) row_loss[warp] = log_sum - static_cast<double>(z[y] - mx);
  if (!dlogits) return;
  float* d = dlogits + static_cast<int64_t>(warp) * classes;
  for (int k = lane; k < classes; k += 32) {
    float v = static_cast<float>(exp(static_cast<double>(z[k] - mx) - log_sum)) * inv;
    d[k] = k == y ? v - inv : v;
  }
}

__global__ void sgd_step_k(float* w, const float* g, float* v, int64_t n, float lr, float mu,
                           float wd) {
  GRID_STRIDE(i, n) {
    const float vi = mu * v[i] + (g[i] + wd * w[i]);
    v[i] = vi;
    w[i] -= lr * vi;
  }
}

}  // namespace

void fill_rows(float* out, const float* row, int rows, int cols, cudaStream_t s) {
  const int64_t n = static_cast<int64_t>(rows) * cols;
  fill_rows_k<<<blocks_for(n), kThreads, 0, s>>>(out, row, n, cols);
}
void col_sum(const float* x, int rows, int cols, float* out, cudaStream_t s) {
  col_sum_k<<<blocks_for(cols), kThreads, 0, s>>>(x, rows, cols, out);
}
void relu_forward(const float* x, float* y, int64_t n, cudaStream_t s) {
  relu_forward_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
}
void relu_backward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t s) {
  relu_backward_k<<<blocks_for(n), kThreads, 0, s>>>(y, dy, dx, n);
}
void dropout_forward(const float* x, float* y, float* mask, int64_t n, uint64_t seed, float p,
                     cudaStream_t s) {
  dropout_forward_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, mask, n, seed, p, 1.0f / (1.0f - p));
}
void multiply(const float* a, const float* b, float* out, int64_t n, cudaStream_t s) {
  multiply_k<<<blocks_for(n), kThreads, 0, s>>>(a, b, out, n);
}
void maxpool_forward(const float* x, float* y, int32_t* argmax, const PoolShape& p,
                     cudaStream_t s) {
  maxpool_forward_k<<<blocks_for(int64_t{p.planes} * p.oh * p.ow), kThreads, 0, s>>>(x, y, argmax,
                                                                                     p);
}
void maxpool_backward(const float* dy, const int32_t* argmax, float* dx, const PoolShape& p,
                      cudaStream_t s) {
  cudaMemsetAsync(dx, 0, sizeof(float) * p.planes * p.h * p.w, s);
  maxpool_backward_k<<<blocks_for(int64_t{p.planes} * p.oh * p.ow), kThreads, 0, s>>>(dy, argmax,
                                                                                      dx, p);
}
void avgpool_forward(const float* x, float* y, const PoolShape& p, cudaStream_t s) {
  avgpool_forward_k<<<blocks_for(int64_t{p.planes} * p.oh * p.ow), kThreads, 0, s>>>(x, y, p);
}
void avgpool_backward(const float* dy, float* dx, const PoolShape& p, cudaStream_t s) {
  avgpool_backward_k<<<blocks_for(int64_t{p.planes} * p.h * p.w), kThreads, 0, s>>>(dy, dx, p);
}
void lrn_forward(const float* x, float* y, float* scale, const LrnShape& l, cudaStream_t s) {
  lrn_forward_k<<<blocks_for(int64_t{l.batch} * l.c * l.hw), kThreads, 0, s>>>(x, y, scale, l);
}
void lrn_backward(const float* x, const float* y, const float* dy, const float* scale, float* dx,
                  const LrnShape& l, cudaStream_t s) {
  lrn_backward_k<<<blocks_for(int64_t{l.batch} * l.c * l.hw), kThreads, 0, s>>>(x, y, dy, scale, dx,
                                                                                l);
}
void softmax_xent(const float* logits, const int32_t* labels, int batch, int classes, float denom,
                  float* dlogits, double* row_loss, cudaStream_t s) {
  const int warps_per_block = kThreads / 32;
  const int blocks = (batch + warps_per_block - 1) / warps_per_block;
  softmax_xent_k<<<blocks, kThreads, 0, s>>>(logits, labels, batch, classes, 1.0f / denom, dlogits,
                                             row_loss);
}
void sgd_step(float* params, const float* grads, float* velocity, int64_t n, float lr, float mu,
              float wd, cudaStream_t s) {
  sgd_step_k<<<blocks_for(n), kThreads, 0, s>>>(params, grads, velocity, n, lr, mu, wd);
}

}  // namespace dltune::engine::gpu::kernels
