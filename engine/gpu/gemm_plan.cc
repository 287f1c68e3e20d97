#include "engine/gpu/gemm_plan.h"

#include <cmath>

namespace dltune::engine::gpu {

bool gemm_valid(const Gemm& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 1) return false;
  const int rows_a = g.trans_a ? g.k : g.m;
  const int rows_b = g.trans_b ? g.n : g.k;
  auto at_least = [](int ld, int rows) { return ld >= (rows > 1 ? rows : 1); };
  return at_least(g.lda, rows_a) && at_least(g.ldb, rows_b) && at_least(g.ldc, g.m);
}

// ---- linear --------------------------------------------------------------------------------

Gemm linear_forward(const float* in, const float* w, float* out, int rows, int in_features,
                    int out_features, float beta) {
  // out^T (O, R) = W (O, I) in^T (I, R): W is stored as the column-major (I, O) W^T.
  Gemm g;
  g.trans_a = true;
  g.m = out_features, g.n = rows, g.k = in_features;
  g.a = w, g.lda = in_features;
  g.b = in, g.ldb = in_features;
  g.beta = beta;
  g.c = out, g.ldc = out_features;
  return g;
}

Gemm linear_weight_grad(const float* in, const float* dout, float* dw, int rows, int in_features,
                        int out_features, float beta) {
  // dW^T (I, O) = in^T (I, R) dout (R, O): dout is stored as the column-major (O, R) dout^T.
  Gemm g;
  g.trans_b = true;
  g.m = in_features, g.n = out_features, g.k = rows;
  g.a = in, g.lda = in_features;
  g.b = dout, g.ldb = out_features;
  g.beta = beta;
  g.c = dw, g.ldc = in_features;
  return g;
}

Gemm linear_input_grad(const float* dout, const float* w, float* din, int rows, int in_features,
                       int out_features, float beta) {
  // din^T (I, R) = W^T (I, O) dout^T (O, R).
  Gemm g;
  g.m = in_features, g.n = rows, g.k = out_features;
  g.a = w, g.lda = in_features;
  g.b = dout, g.ldb = out_features;
  g.beta = beta;
  g.c = din, g.ldc = in_features;
  return g;
}

Gemm linear_bias_grad(const float* dout, const float* ones, float* db, int rows, int out_features,
                      float beta) {
  // db (O, 1) = dout^T (O, R) ones (R, 1).
  Gemm g;
  g.m = out_features, g.n = 1, g.k = rows;
  g.a = dout, g.lda = out_features;
  g.b = ones, g.ldb = rows;
  g.beta = beta;
  g.c = db, g.ldc = out_features;
  return g;
}

// ---- attention -----------------------------------------------------------------------------

float AttentionDims::scale() const { return 1.0f / std::sqrt(static_cast<float>(hs())); }

namespace {

// Offsets (floats) of a group's first (sample, head) pair and strides between its pairs, in
// qkv (B, T, 3C) / dqkv and out (B, T, C) / dout.
int64_t qkv_offset(const AttentionDims& d, int g) {
  return d.over_heads() ? int64_t{g} * d.t * 3 * d.c : int64_t{g} * d.hs();
}
int64_t qkv_stride(const AttentionDims& d) {
  return d.over_heads() ? d.hs() : int64_t{d.t} * 3 * d.c;
}
int64_t out_offset(const AttentionDims& d, int g) {
  return d.over_heads() ? int64_t{g} * d.t * d.c : int64_t{g} * d.hs();
}
int64_t out_stride(const AttentionDims& d) { return d.over_heads() ? d.hs() : int64_t{d.t} * d.c; }

// The (T, hs) views of a group's first pair: q, k, v in qkv (row stride 3C).
struct Qkv {
  const float *q, *k, *v;
};
Qkv views(const AttentionDims& d, int g, const float* qkv) {
  const float* base = qkv + qkv_offset(d, g);
  return {base, base + d.c, base + 2 * d.c};
}

// A batched product over the group's pairs with the given strides.
Gemm batched(const AttentionDims& d, bool ta, bool tb, int m, int n, int k, float alpha,
             const float* a, int lda, int64_t sa, const float* b, int ldb, int64_t sb, float beta,
             float* c, int ldc, int64_t sc) {
  Gemm g;
  g.trans_a = ta, g.trans_b = tb;
  g.m = m, g.n = n, g.k = k;
  g.alpha = alpha;
  g.a = a, g.lda = lda, g.stride_a = sa;
  g.b = b, g.ldb = ldb, g.stride_b = sb;
  g.beta = beta;
  g.c = c, g.ldc = ldc, g.stride_c = sc;
  g.batch = d.group_size();
  return g;
}

}  // namespace

int64_t attention_probs_offset(const AttentionDims& d, int g) {
  const int64_t tt = int64_t{d.t} * d.t;
  return d.over_heads() ? int64_t{g} * d.heads * tt : int64_t{g} * tt;
}
int64_t attention_probs_stride(const AttentionDims& d) {
  const int64_t tt = int64_t{d.t} * d.t;
  return d.over_heads() ? tt : int64_t{d.heads} * tt;
}

Gemm attention_scores(const AttentionDims& d, int g, const float* qkv, float* probs) {
  // S^T (T, T) = K Q^T: K is stored as the column-major (hs, T) K^T (ld 3C), Q likewise.
  const Qkv x = views(d, g, qkv);
  const int T = d.t, ld = 3 * d.c;
  return batched(d, true, false, T, T, d.hs(), d.scale(), x.k, ld, qkv_stride(d), x.q, ld,
                 qkv_stride(d), 0.0f, probs + attention_probs_offset(d, g), T,
                 attention_probs_stride(d));
}

Gemm attention_values(const AttentionDims& d, int g, const float* probs, const float* qkv,
                      float* out) {
  // out^T (hs, T) = V^T (hs, T) P^T (T, T).
  const Qkv x = views(d, g, qkv);
  const int T = d.t;
  return batched(d, false, false, d.hs(), T, T, 1.0f, x.v, 3 * d.c, qkv_stride(d),
                 probs + attention_probs_offset(d, g), T, attention_probs_stride(d), 0.0f,
                 out + out_offset(d, g), d.c, out_stride(d));
}

Gemm attention_dv(const AttentionDims& d, int g, const float* probs, const float* dout, float* dqkv,
                  float beta) {
  // dV^T (hs, T) = dOut^T (hs, T) P (T, T): P is stored as the column-major P^T, transposed.
  const int T = d.t;
  float* dv = dqkv + qkv_offset(d, g) + 2 * d.c;
  return batched(d, false, true, d.hs(), T, T, 1.0f, dout + out_offset(d, g), d.c, out_stride(d),
                 probs + attention_probs_offset(d, g), T, attention_probs_stride(d), beta, dv,
                 3 * d.c, qkv_stride(d));
}

Gemm attention_dp(const AttentionDims& d, int g, const float* dout, const float* qkv, float* dp) {
  // dP^T (T, T) = V (T, hs) dOut^T (hs, T).
  const Qkv x = views(d, g, qkv);
  const int T = d.t;
  return batched(d, true, false, T, T, d.hs(), 1.0f, x.v, 3 * d.c, qkv_stride(d),
                 dout + out_offset(d, g), d.c, out_stride(d), 0.0f, dp, T, int64_t{T} * T);
}

Gemm attention_dq(const AttentionDims& d, int g, const float* dp, const float* qkv, float* dqkv,
                  float beta) {
  // dQ^T (hs, T) = K^T (hs, T) dS^T (T, T).
  const Qkv x = views(d, g, qkv);
  const int T = d.t;
  return batched(d, false, false, d.hs(), T, T, 1.0f, x.k, 3 * d.c, qkv_stride(d), dp, T,
                 int64_t{T} * T, beta, dqkv + qkv_offset(d, g), 3 * d.c, qkv_stride(d));
}

Gemm attention_dk(const AttentionDims& d, int g, const float* dp, const float* qkv, float* dqkv,
                  float beta) {
  // dK^T (hs, T) = Q^T (hs, T) dS (T, T): dS is stored as the column-major dS^T, transposed.
  const Qkv x = views(d, g, qkv);
  const int T = d.t;
  return batched(d, false, true, d.hs(), T, T, 1.0f, x.q, 3 * d.c, qkv_stride(d), dp, T,
                 int64_t{T} * T, beta, dqkv + qkv_offset(d, g) + d.c, 3 * d.c, qkv_stride(d));
}

}  // namespace dltune::engine::gpu
