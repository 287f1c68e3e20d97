// Layer norm (engine/ops/norm.h) on the rank's threads.
//
// Rows are independent in forward and in the input gradient: the threads take ranges of rows.
// The parameter gradients sum over rows: rows are cut into fixed blocks (kLayerNormBlockFloats of
// input per block, a function of the shape), each block sums its rows in order into its own
// partial (the op's workspace), and the partials are added in block order: the same bits on
// any number of threads.
//
// The per-row sums run in 8 lanes (lane l takes the elements i = l mod 8) so that they
// vectorise; built for AVX2 + FMA and for the baseline (engine/ops/vec.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/core/parallel.h"
#include "engine/ops/norm.h"
#include "engine/ops/vec.h"

namespace dltune::engine {
namespace {

typedef float v8 __attribute__((vector_size(32)));

[[gnu::always_inline]] inline float hsum(v8 a, float tail) {
  float s = tail;
  for (int l = 0; l < 8; ++l) s += a[l];
  return s;
}

// y = (x - mean) rstd w + b for one row; saves mean and rstd.
[[gnu::always_inline]] inline void ln_row_forward(const float* x, const float* w, const float* b,
                                                  int64_t C, float eps, float* y, float* mean_out,
                                                  float* rstd_out) {
  const int64_t C8 = C / 8 * 8;
  v8 acc{};
  float tail = 0.0f;
  for (int64_t i = 0; i < C8; i += 8) acc += vload<v8>(x + i);
  for (int64_t i = C8; i < C; ++i) tail += x[i];
  const float mean = hsum(acc, tail) / static_cast<float>(C);
  v8 sq{};
  float sq_tail = 0.0f;
  for (int64_t i = 0; i < C8; i += 8) {
    const v8 d = vload<v8>(x + i) - mean;
    sq += d * d;
  }
  for (int64_t i = C8; i < C; ++i) sq_tail += (x[i] - mean) * (x[i] - mean);
  const float rstd = 1.0f / std::sqrt(hsum(sq, sq_tail) / static_cast<float>(C) + eps);
  for (int64_t i = 0; i < C8; i += 8)
    vstore(y + i, (vload<v8>(x + i) - mean) * rstd * vload<v8>(w + i) + vload<v8>(b + i));
  for (int64_t i = C8; i < C; ++i) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
  *mean_out = mean;
  *rstd_out = rstd;
}

// One row's input gradient (written or added) and its dw, db contributions (added).
[[gnu::always_inline]] inline void ln_row_backward(const float* x, const float* dy, const float* w,
                                                   int64_t C, float mean, float rstd, float* dw,
                                                   float* db, float* dx, bool acc) {
  const int64_t C8 = C / 8 * 8;
  v8 g8{}, gx8{};
  float g_tail = 0.0f, gx_tail = 0.0f;
  for (int64_t i = 0; i < C8; i += 8) {
    const v8 xhat = (vload<v8>(x + i) - mean) * rstd;
    const v8 d = vload<v8>(dy + i);
    const v8 g = d * vload<v8>(w + i);
    g8 += g;
    gx8 += g * xhat;
    vstore(dw + i, vload<v8>(dw + i) + d * xhat);
    vstore(db + i, vload<v8>(db + i) + d);
  }
  for (int64_t i = C8; i < C; ++i) {
    const float xhat = (x[i] - mean) * rstd;
    const float g = dy[i] * w[i];
    g_tail += g;
    gx_tail += g * xhat;
    dw[i] += dy[i] * xhat;
    db[i] += dy[i];
  }
  const float inv_c = 1.0f / static_cast<float>(C);
  const float mg = hsum(g8, g_tail) * inv_c, mgx = hsum(gx8, gx_tail) * inv_c;
  if (dx == nullptr) return;
  for (int64_t i = 0; i < C8; i += 8) {
    const v8 xhat = (vload<v8>(x + i) - mean) * rstd;
    v8 v = rstd * (vload<v8>(dy + i) * vload<v8>(w + i) - mg - xhat * mgx);
    if (acc) v += vload<v8>(dx + i);
    vstore(dx + i, v);
  }
  for (int64_t i = C8; i < C; ++i) {
    const float xhat = (x[i] - mean) * rstd;
    const float v = rstd * (dy[i] * w[i] - mg - xhat * mgx);
    dx[i] = acc ? dx[i] + v : v;
  }
}

struct LnRows {
  const float *x, *w, *b;
  int64_t C;
  float eps;
};

DLTUNE_AVX2 void forward_rows_avx2(const LnRows& r, int64_t r0, int64_t r1, float* y, float* mean,
                                   float* rstd) {
  for (int64_t i = r0; i < r1; ++i)
    ln_row_forward(r.x + i * r.C, r.w, r.b, r.C, r.eps, y + i * r.C, mean + i, rstd + i);
}
void forward_rows_generic(const LnRows& r, int64_t r0, int64_t r1, float* y, float* mean,
                          float* rstd) {
  for (int64_t i = r0; i < r1; ++i)
    ln_row_forward(r.x + i * r.C, r.w, r.b, r.C, r.eps, y + i * r.C, mean + i, rstd + i);
}

struct LnGrad {
  const float *x, *dy, *w, *mean, *rstd;
  int64_t C;
  float* dx;
  bool acc;
};

DLTUNE_AVX2 void backward_rows_avx2(const LnGrad& g, int64_t r0, int64_t r1, float* dw, float* db) {
  for (int64_t i = r0; i < r1; ++i)
    ln_row_backward(g.x + i * g.C, g.dy + i * g.C, g.w, g.C, g.mean[i], g.rstd[i], dw, db,
                    g.dx ? g.dx + i * g.C : nullptr, g.acc);
}
void backward_rows_generic(const LnGrad& g, int64_t r0, int64_t r1, float* dw, float* db) {
  for (int64_t i = r0; i < r1; ++i)
    ln_row_backward(g.x + i * g.C, g.dy + i * g.C, g.w, g.C, g.mean[i], g.rstd[i], dw, db,
                    g.dx ? g.dx + i * g.C : nullptr, g.acc);
}

}  // namespace

Status LayerNorm::configure() {
  c_ = in_[0].back();
  rows_ = in_numel() / c_;
  return ok_status();
}

void LayerNorm::reserve(int max_batch) {
  mean_.reserve(static_cast<size_t>(max_batch * rows_));
  rstd_.reserve(static_cast<size_t>(max_batch * rows_));
}

void LayerNorm::forward(const OpContext& ctx, const float* const* in, float* out, int batch) {
  // in (R, C) -> out (R, C), R = B x rows per sample
  const LnRows r{in[0], params_[0], params_[1], c_, static_cast<float>(attrs().eps)};
  const int64_t R = batch * rows_;
  const bool avx2 = use_avx2_kernels();
  parallel_ranges(*ctx.pool, R, row_blocks(batch), [&](int64_t r0, int64_t r1, int) {
    if (avx2) return forward_rows_avx2(r, r0, r1, out, mean_.data(), rstd_.data());
    forward_rows_generic(r, r0, r1, out, mean_.data(), rstd_.data());
  });
}

void LayerNorm::backward(const OpContext& ctx, const float* const* in, const float*,
                         const float* dout, const GradOut* din, int batch) {
  // dout (R, C) -> dx (R, C); dw, db (C) summed over the rows by blocks (the header's rule)
  const LnGrad g{in[0],        dout, params_[0],  mean_.data(),
                 rstd_.data(), c_,   din[0].data, din[0].accumulate};
  const int64_t R = batch * rows_, blocks = row_blocks(batch);
  float* partial = ctx.workspace;  // (blocks, 2, C): dw then db of each block
  const bool avx2 = use_avx2_kernels();
  ctx.pool->run(blocks, [&](int64_t k, int) {
    int64_t r0 = 0, r1 = 0;
    part_range(R, blocks, k, &r0, &r1);
    float* dw = partial + k * 2 * c_;
    float* db = dw + c_;
    std::memset(dw, 0, sizeof(float) * 2 * c_);
    if (avx2) return backward_rows_avx2(g, r0, r1, dw, db);
    backward_rows_generic(g, r0, r1, dw, db);
  });
  sum_partials(*ctx.pool, partial, 2 * c_, blocks, c_, grads_[0], accumulate_grad(ctx, 0));
  sum_partials(*ctx.pool, partial + c_, 2 * c_, blocks, c_, grads_[1], accumulate_grad(ctx, 1));
}

}  // namespace dltune::engine
