// Batch norm and layer norm (contracts in kernels.h, math in kernel_math.h).
//
// Batch norm reduces each channel's N = B x S values. One block per channel would leave most of
// the GPU idle for the wide, shallow layers of a ResNet's stem (64 channels of 800k values), so
// each channel is cut into P = bn_parts(N) contiguous ranges, a block per (channel, range) adds
// its range in double (sum and sum of squares forward; sum dy and sum dy (x - mean) backward),
// and a thread per channel then adds the P partials in order and finishes the statistics (and,
// in training, the running statistics and the counter). The element-wise pass applies them.
// Fixed ranges and orders: the same bits on every run.
//
// Layer norm gives each row (C features) a warp: the row's mean and variance (float sums, as the
// CPU's) and, backward, its input gradient. The parameter gradients are column sums over the
// rows: blocks of 32 columns x 8 row lanes add a range of rows (ln_parts ranges), then a thread
// per column adds the ranges in order.
#include "engine/gpu/kernels.h"
#include "engine/gpu/kernels_util.cuh"

namespace dltune::engine::gpu::kernels {
namespace {

// ---- batch norm ------------------------------------------------------------------------------

// Grid (C, parts): the partial sums of part blockIdx.y of channel blockIdx.x, over f(j) of its
// values: forward (x, x^2), backward (dy, dy (x - mean)).
__global__ void bn_forward_parts_k(const float* x, BnShape sh, int parts, double* partials) {
  __shared__ double sh_mem[kThreads];
  const int c = static_cast<int>(blockIdx.x), p = static_cast<int>(blockIdx.y);
  int64_t begin, end;
  math::bn_part_range(sh.n(), parts, p, &begin, &end);
  double s = 0.0, q = 0.0;
  for (int64_t j = begin + threadIdx.x; j < end; j += kThreads) {
    const double v = x[math::bn_index(j, c, sh.c, sh.s)];
    s += v;
    q += v * v;
  }
  s = block_sum(s, sh_mem);
  q = block_sum(q, sh_mem);
  if (threadIdx.x == 0) {
    double* out = partials + (int64_t{c} * parts + p) * 2;
    out[0] = s;
    out[1] = q;
  }
}

__global__ void bn_backward_parts_k(const float* x, const float* dy, const float* mean, BnShape sh,
                                    int parts, double* partials) {
  __shared__ double sh_mem[kThreads];
  const int c = static_cast<int>(blockIdx.x), p = static_cast<int>(blockIdx.y);
  int64_t begin, end;
  math::bn_part_range(sh.n(), parts, p, &begin, &end);
  const float m = mean[c];
  double s0 = 0.0, s1 = 0.0;
  for (int64_t j = begin + threadIdx.x; j < end; j += kThreads) {
    const int64_t at = math::bn_index(j, c, sh.c, sh.s);
    const float g = dy[at];
    s0 += g;
    s1 += static_cast<double>(g * (x[at] - m));
  }
  s0 = block_sum(s0, sh_mem);
  s1 = block_sum(s1, sh_mem);
  if (threadIdx.x == 0) {
    double* out = partials + (int64_t{c} * parts + p) * 2;
    out[0] = s0;
    out[1] = s1;
  }
}

// Thread per channel: the statistics of the batch (training) or the running ones (evaluation).
__global__ void bn_stats_k(const double* partials, int parts, BnShape sh, bool training,
                           float* running_mean, float* running_var, float* count, float* mean,
                           float* invstd) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= sh.c) return;
  math::BnStats st;
  if (training) {
    double s = 0.0, q = 0.0;
    for (int p = 0; p < parts; ++p) {
      s += partials[(int64_t{c} * parts + p) * 2];
      q += partials[(int64_t{c} * parts + p) * 2 + 1];
    }
    st = math::bn_train_stats(s, q, sh.n(), sh.eps, sh.momentum, &running_mean[c], &running_var[c]);
    if (c == 0) count[0] += 1.0f;
  } else {
    st = math::bn_eval_stats(running_mean[c], running_var[c], sh.eps);
  }
  mean[c] = st.mean;
  invstd[c] = st.invstd;
}

__global__ void bn_apply_k(const float* x, float* y, const float* w, const float* b,
                           const float* mean, const float* invstd, BnShape sh, int64_t n) {
  DLTUNE_GRID_STRIDE(i, n) {
    const int c = static_cast<int>((i / sh.s) % sh.c);
    y[i] = math::bn_apply(x[i], w[c], b[c], {mean[c], invstd[c]});
  }
}

// Thread per channel: the parameter gradients and dx's coefficients (a, mdy, k) into coefs.
__global__ void bn_grads_k(const double* partials, int parts, BnShape sh, const float* w,
                           const float* mean, const float* invstd, float* dw, float* db,
                           float* coefs, bool acc_w, bool acc_b) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= sh.c) return;
  double s0 = 0.0, s1 = 0.0;
  for (int p = 0; p < parts; ++p) {
    s0 += partials[(int64_t{c} * parts + p) * 2];
    s1 += partials[(int64_t{c} * parts + p) * 2 + 1];
  }
  const math::BnBackward k = math::bn_backward_coefs(s0, s1, sh.n(), w[c], {mean[c], invstd[c]});
  dw[c] = k.dw + (acc_w ? dw[c] : 0.0f);
  db[c] = k.db + (acc_b ? db[c] : 0.0f);
  coefs[3 * c] = k.a;
  coefs[3 * c + 1] = k.mdy;
  coefs[3 * c + 2] = k.k;
}

__global__ void bn_dx_k(const float* x, const float* dy, float* dx, const float* mean,
                        const float* coefs, BnShape sh, int64_t n, bool training, bool acc) {
  DLTUNE_GRID_STRIDE(i, n) {
    const int c = static_cast<int>((i / sh.s) % sh.c);
    math::BnBackward k{0.0f, 0.0f, coefs[3 * c], coefs[3 * c + 1], coefs[3 * c + 2]};
    dx[i] = math::bn_dx(x[i], dy[i], mean[c], k, training, acc ? dx[i] : 0.0f);
  }
}

// ---- layer norm ------------------------------------------------------------------------------

__global__ void ln_forward_k(const float* x, float* y, const float* w, const float* b, float* mean,
                             float* rstd, int64_t rows, int c, float eps) {
  const int64_t row = warp_row();
  const int lane = lane_id();
  if (row >= rows) return;
  const float* xr = x + row * c;
  float* yr = y + row * c;
  float s = 0.0f;
  for (int i = lane; i < c; i += kWarp) s += xr[i];
  const float m = warp_sum(s) / static_cast<float>(c);
  float q = 0.0f;
  for (int i = lane; i < c; i += kWarp) q += (xr[i] - m) * (xr[i] - m);
  const float r = 1.0f / sqrtf(warp_sum(q) / static_cast<float>(c) + eps);
  for (int i = lane; i < c; i += kWarp) yr[i] = math::ln_apply(xr[i], m, r, w[i], b[i]);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

__global__ void ln_dx_k(const float* x, const float* dy, float* dx, const float* w,
                        const float* mean, const float* rstd, int64_t rows, int c, bool acc) {
  const int64_t row = warp_row();
  const int lane = lane_id();
  if (row >= rows) return;
  const float* xr = x + row * c;
  const float* dyr = dy + row * c;
  float* dxr = dx + row * c;
  const float m = mean[row], r = rstd[row];
  float mg = 0.0f, mgx = 0.0f;
  for (int i = lane; i < c; i += kWarp) {
    const float g = dyr[i] * w[i];
    mg += g;
    mgx += g * ((xr[i] - m) * r);
  }
  const float inv_c = 1.0f / static_cast<float>(c);
  mg = warp_sum(mg) * inv_c;
  mgx = warp_sum(mgx) * inv_c;
  for (int i = lane; i < c; i += kWarp)
    dxr[i] = math::ln_dx(xr[i], dyr[i], w[i], m, r, mg, mgx, acc ? dxr[i] : 0.0f);
}

constexpr int kLnCols = 32, kLnLanes = kThreads / kLnCols;  // block (32 columns, 8 row lanes)

// Grid (ceil(C / 32), parts): column partial sums of dy xhat (dw) and dy (db) over the rows of
// part blockIdx.y; partials (parts, C) for dw, then (parts, C) for db.
__global__ void ln_param_parts_k(const float* x, const float* dy, const float* mean,
                                 const float* rstd, int64_t rows, int c, int parts,
                                 float* partials) {
  __shared__ float sw[kLnLanes][kLnCols], sb[kLnLanes][kLnCols];
  const int tx = static_cast<int>(threadIdx.x % kLnCols),
            ty = static_cast<int>(threadIdx.x / kLnCols);
  const int col = static_cast<int>(blockIdx.x) * kLnCols + tx;
  const int p = static_cast<int>(blockIdx.y);
  int64_t begin, end;
  math::bn_part_range(rows, parts, p, &begin, &end);
  float aw = 0.0f, ab = 0.0f;
  if (col < c)
    for (int64_t r = begin + ty; r < end; r += kLnLanes) {
      const float g = dy[r * c + col];
      aw += g * ((x[r * c + col] - mean[r]) * rstd[r]);
      ab += g;
    }
  sw[ty][tx] = aw;
  sb[ty][tx] = ab;
  __syncthreads();
  if (ty == 0 && col < c) {
    for (int l = 1; l < kLnLanes; ++l) {
      aw += sw[l][tx];
      ab += sb[l][tx];
    }
    partials[int64_t{p} * c + col] = aw;
    partials[(int64_t{parts} + p) * c + col] = ab;
  }
}

__global__ void ln_param_sum_k(const float* partials, int parts, int c, float* dw, float* db,
                               bool acc_w, bool acc_b) {
  DLTUNE_GRID_STRIDE(col, c) {
    float aw = acc_w ? dw[col] : 0.0f, ab = acc_b ? db[col] : 0.0f;
    for (int p = 0; p < parts; ++p) {
      aw += partials[int64_t{p} * c + col];
      ab += partials[(int64_t{parts} + p) * c + col];
    }
    dw[col] = aw;
    db[col] = ab;
  }
}

}  // namespace

void batchnorm_forward(const float* x, float* y, const float* w, const float* b,
                       float* running_mean, float* running_var, float* count, float* mean,
                       float* invstd, double* partials, const BnShape& sh, bool training,
                       cudaStream_t s) {
  if (sh.c <= 0 || sh.n() <= 0) return;
  const int parts = math::bn_parts(sh.n());
  if (training)
    bn_forward_parts_k<<<dim3(static_cast<unsigned>(sh.c), static_cast<unsigned>(parts)), kThreads,
                         0, s>>>(x, sh, parts, partials);
  bn_stats_k<<<blocks_for(sh.c), kThreads, 0, s>>>(partials, parts, sh, training, running_mean,
                                                   running_var, count, mean, invstd);
  const int64_t n = sh.n() * sh.c;
  bn_apply_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, w, b, mean, invstd, sh, n);
}

void batchnorm_backward(const float* x, const float* dy, float* dx, const float* w,
                        const float* mean, const float* invstd, float* dw, float* db, float* coefs,
                        double* partials, const BnShape& sh, bool training, bool acc_w, bool acc_b,
                        bool acc_x, cudaStream_t s) {
  if (sh.c <= 0 || sh.n() <= 0) return;
  const int parts = math::bn_parts(sh.n());
  bn_backward_parts_k<<<dim3(static_cast<unsigned>(sh.c), static_cast<unsigned>(parts)), kThreads,
                        0, s>>>(x, dy, mean, sh, parts, partials);
  bn_grads_k<<<blocks_for(sh.c), kThreads, 0, s>>>(partials, parts, sh, w, mean, invstd, dw, db,
                                                   coefs, acc_w, acc_b);
  if (!dx) return;
  const int64_t n = sh.n() * sh.c;
  bn_dx_k<<<blocks_for(n), kThreads, 0, s>>>(x, dy, dx, mean, coefs, sh, n, training, acc_x);
}

void layernorm_forward(const float* x, float* y, const float* w, const float* b, float* mean,
                       float* rstd, int64_t rows, int c, float eps, cudaStream_t s) {
  if (rows <= 0 || c <= 0) return;
  ln_forward_k<<<blocks_for_rows(rows), kThreads, 0, s>>>(x, y, w, b, mean, rstd, rows, c, eps);
}

void layernorm_backward(const float* x, const float* dy, float* dx, const float* w,
                        const float* mean, const float* rstd, float* dw, float* db, float* partials,
                        int64_t rows, int c, bool acc_w, bool acc_b, bool acc_x, cudaStream_t s) {
  if (rows <= 0 || c <= 0) return;
  const int parts = math::ln_parts(rows);
  const unsigned col_blocks = static_cast<unsigned>((c + kLnCols - 1) / kLnCols);
  ln_param_parts_k<<<dim3(col_blocks, static_cast<unsigned>(parts)), kThreads, 0, s>>>(
      x, dy, mean, rstd, rows, c, parts, partials);
  ln_param_sum_k<<<blocks_for(c), kThreads, 0, s>>>(partials, parts, c, dw, db, acc_w, acc_b);
  if (dx)
    ln_dx_k<<<blocks_for_rows(rows), kThreads, 0, s>>>(x, dy, dx, w, mean, rstd, rows, c, acc_x);
}

}  // namespace dltune::engine::gpu::kernels
