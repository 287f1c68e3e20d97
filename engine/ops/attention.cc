#include "engine/ops/attention.h"

#include <cmath>
#include <cstring>

#include "engine/core/gemm.h"
#include "engine/ops/vec.h"
#include "engine/ops/vmath.h"

// The threads take (sample, head) pairs: each writes its own probabilities and its head's
// columns of the output (or of the qkv gradient), with one-thread BLAS calls: the same bits on
// any number of threads.
//
// bf16 (engine/core/precision.h): the four products read bf16-rounded operands: the head's
// q, k, v and output gradient are copied rounded into the thread's scratch, the probabilities
// are stored rounded (as autocast's softmax of a bf16 product returns them), the scores' and
// dP's products are rounded as they come out, and the softmax and its backward run in fp32.

namespace dltune::engine {
namespace {

typedef float v8 __attribute__((vector_size(32)));

// row[0, n) <- softmax(row[0, n)): the maximum (exact in any order), exp in vectors of 8
// (engine/ops/vmath.h), the sum in 8 lanes added in lane order, then the scaling.
[[gnu::always_inline]] inline void softmax_row_any(float* row, int n) {
  float mx = row[0];
  for (int s = 1; s < n; ++s) mx = row[s] > mx ? row[s] : mx;
  v8 acc{};
  int s = 0;
  for (; s + 8 <= n; s += 8) {
    const v8 e = vexp(vload<v8>(row + s) - mx);
    vstore(row + s, e);
    acc += e;
  }
  float sum = 0.0f;
  for (int l = 0; l < 8; ++l) sum += acc[l];
  for (; s < n; ++s) {
    row[s] = std::exp(row[s] - mx);
    sum += row[s];
  }
  const float inv = 1.0f / sum;
  for (s = 0; s < n; ++s) row[s] *= inv;
}

// d[0, n) <- p (d - sum(d p)) scale: softmax's backward of one row.
[[gnu::always_inline]] inline void softmax_grad_row_any(const float* p, float* d, int n,
                                                        float scale) {
  v8 acc{};
  int s = 0;
  for (; s + 8 <= n; s += 8) acc += vload<v8>(d + s) * vload<v8>(p + s);
  float dot = 0.0f;
  for (int l = 0; l < 8; ++l) dot += acc[l];
  for (; s < n; ++s) dot += d[s] * p[s];
  for (s = 0; s < n; ++s) d[s] = p[s] * (d[s] - dot) * scale;
}

DLTUNE_AVX2 void softmax_row_avx2(float* row, int n) { softmax_row_any(row, n); }
void softmax_row_generic(float* row, int n) { softmax_row_any(row, n); }
DLTUNE_AVX2 void softmax_grad_row_avx2(const float* p, float* d, int n, float scale) {
  softmax_grad_row_any(p, d, n, scale);
}
void softmax_grad_row_generic(const float* p, float* d, int n, float scale) {
  softmax_grad_row_any(p, d, n, scale);
}

// dst (T, hs) rows `ld` apart <- bf16_round(src (T, hs), rows `lds` apart).
void round_head(const float* src, int64_t lds, float* dst, int T, int hs) {
  for (int t = 0; t < T; ++t) bf16_round_array(src + int64_t{t} * lds, dst + int64_t{t} * hs, hs);
}

// dst (T, hs) rows `ld` apart = (or += when acc) bf16_round(src (T, hs) contiguous).
void store_head(const float* src, float* dst, int64_t ld, int T, int hs, bool acc) {
  for (int t = 0; t < T; ++t) {
    float* d = dst + int64_t{t} * ld;
    const float* s = src + int64_t{t} * hs;
    for (int i = 0; i < hs; ++i) d[i] = acc ? d[i] + bf16_round(s[i]) : bf16_round(s[i]);
  }
}

}  // namespace

Status Attention::configure() {
  t_ = static_cast<int>(in_[0][0]);
  c_ = static_cast<int>(out_[1]);
  heads_ = static_cast<int>(attrs().heads);
  hs_ = c_ / heads_;
  return ok_status();
}

void Attention::reserve(int max_batch) {
  probs_.reserve(static_cast<size_t>(int64_t{max_batch} * heads_ * t_ * t_));
}

void Attention::forward(const OpContext& ctx, const float* const* in, float* out, int batch) {
  const int T = t_, C = c_, C3 = 3 * c_, hs = hs_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const bool bf16 = precision_ == Precision::kBf16, avx2 = use_avx2_kernels();
  ctx.pool->run(int64_t{batch} * heads_, [&](int64_t task, int thread) {
    const int64_t b = task / heads_;
    const int h = static_cast<int>(task % heads_);
    const float* qkv = in[0] + b * T * C3;
    const float* q = qkv + h * hs;          // (T, hs), row stride 3C
    const float* k = qkv + C + h * hs;      // (T, hs)
    const float* v = qkv + 2 * C + h * hs;  // (T, hs)
    int64_t ld = C3;
    float* p = probs_.data() + (b * heads_ + h) * T * T;  // (T, T)
    float* o = out + b * T * C + h * hs;                  // (T, hs), row stride C
    float* ws = ctx.workspace + thread * thread_floats() + int64_t{T} * T;
    if (bf16) {  // rounded copies, rows hs apart
      float* qb = ws;
      float* kb = qb + int64_t{T} * hs;
      float* vb = kb + int64_t{T} * hs;
      round_head(q, C3, qb, T, hs);
      round_head(k, C3, kb, T, hs);
      round_head(v, C3, vb, T, hs);
      q = qb, k = kb, v = vb, ld = hs;
    }
    // S (T, T) = scale Q K^T
    serial_sgemm(false, true, T, T, hs, scale, q, ld, k, ld, 0.0f, p, T);
    for (int t = 0; t < T; ++t) {  // causal softmax of row t over s <= t
      float* row = p + int64_t{t} * T;
      if (bf16) bf16_round_array(row, row, t + 1);
      if (avx2) {
        softmax_row_avx2(row, t + 1);
      } else {
        softmax_row_generic(row, t + 1);
      }
      if (bf16) bf16_round_array(row, row, t + 1);
      for (int s = t + 1; s < T; ++s) row[s] = 0.0f;
    }
    // out (T, hs) = P (T, T) V (T, hs), into columns [h hs, (h+1) hs) of out (T, C)
    serial_sgemm(false, false, T, hs, T, 1.0f, p, T, v, ld, 0.0f, o, C);
    if (bf16)
      for (int t = 0; t < T; ++t) bf16_round_array(o + int64_t{t} * C, o + int64_t{t} * C, hs);
  });
}

void Attention::backward(const OpContext& ctx, const float* const* in, const float*,
                         const float* dout, const GradOut* din, int batch) {
  float* dqkv_all = din[0].data;
  if (!dqkv_all) return;
  const bool acc = din[0].accumulate;
  const int T = t_, C = c_, C3 = 3 * c_, hs = hs_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const bool bf16 = precision_ == Precision::kBf16, avx2 = use_avx2_kernels();
  const int64_t head = int64_t{T} * hs;
  ctx.pool->run(int64_t{batch} * heads_, [&](int64_t task, int thread) {
    const int64_t b = task / heads_;
    const int h = static_cast<int>(task % heads_);
    float* dp = ctx.workspace + thread * thread_floats();  // (T, T)
    const float* qkv = in[0] + b * T * C3;
    float* dqkv = dqkv_all + b * T * C3;
    const float* q = qkv + h * hs;
    const float* k = qkv + C + h * hs;
    const float* v = qkv + 2 * C + h * hs;
    const float* p = probs_.data() + (b * heads_ + h) * T * T;
    const float* dy = dout + b * T * C + h * hs;  // (T, hs), row stride C
    int64_t ld = C3, ldy = C;
    // Where dQ, dK, dV go: the gradient's columns, or (bf16) scratch rounded into them after.
    float* dq = dqkv + h * hs;
    float* dk = dqkv + C + h * hs;
    float* dv = dqkv + 2 * C + h * hs;
    int64_t ldd = C3;
    float beta = acc ? 1.0f : 0.0f;
    if (bf16) {
      float* s = dp + int64_t{T} * T;
      round_head(q, C3, s, T, hs);
      round_head(k, C3, s + head, T, hs);
      round_head(v, C3, s + 2 * head, T, hs);
      round_head(dy, C, s + 3 * head, T, hs);
      q = s, k = s + head, v = s + 2 * head, dy = s + 3 * head, ld = hs, ldy = hs;
      dq = s + 4 * head, dk = s + 5 * head, dv = s + 6 * head, ldd = hs, beta = 0.0f;
    }
    // dV (T, hs) = P^T (T, T) dOut (T, hs)
    serial_sgemm(true, false, T, hs, T, 1.0f, p, T, dy, ldy, beta, dv, ldd);
    // dP (T, T) = dOut (T, hs) V^T (hs, T)
    serial_sgemm(false, true, T, T, hs, 1.0f, dy, ldy, v, ld, 0.0f, dp, T);
    // dS = P (dP - rowsum(dP P)) scale, in place in dp (zero above the diagonal: P is)
    for (int t = 0; t < T; ++t) {
      const float* pr = p + int64_t{t} * T;
      float* dr = dp + int64_t{t} * T;
      if (bf16) bf16_round_array(dr, dr, t + 1);
      if (avx2) {
        softmax_grad_row_avx2(pr, dr, t + 1, scale);
      } else {
        softmax_grad_row_generic(pr, dr, t + 1, scale);
      }
      if (bf16) bf16_round_array(dr, dr, t + 1);
      for (int s = t + 1; s < T; ++s) dr[s] = 0.0f;
    }
    // dQ (T, hs) = dS (T, T) K (T, hs);  dK (T, hs) = dS^T (T, T) Q (T, hs)
    serial_sgemm(false, false, T, hs, T, 1.0f, dp, T, k, ld, beta, dq, ldd);
    serial_sgemm(true, false, T, hs, T, 1.0f, dp, T, q, ld, beta, dk, ldd);
    if (bf16) {
      store_head(dq, dqkv + h * hs, C3, T, hs, acc);
      store_head(dk, dqkv + C + h * hs, C3, T, hs, acc);
      store_head(dv, dqkv + 2 * C + h * hs, C3, T, hs, acc);
    }
  });
}

}  // namespace dltune::engine
