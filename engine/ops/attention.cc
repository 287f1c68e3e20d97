#include "engine/ops/attention.h"

#include <cmath>
#include <cstring>

#include <cblas.h>

namespace dltune::engine {

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

void Attention::forward(const OpContext&, const float* const* in, float* out, int batch) {
  const int T = t_, C = c_, C3 = 3 * c_, hs = hs_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < batch; ++b) {
    const float* qkv = in[0] + int64_t{b} * T * C3;
    for (int h = 0; h < heads_; ++h) {
      const float* q = qkv + h * hs;                                 // (T, hs), row stride 3C
      const float* k = qkv + C + h * hs;                             // (T, hs)
      const float* v = qkv + 2 * C + h * hs;                         // (T, hs)
      float* p = probs_.data() + (int64_t{b} * heads_ + h) * T * T;  // (T, T)
      // S (T, T) = scale Q K^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3, 0.0f, p,
                  T);
      for (int t = 0; t < T; ++t) {  // causal softmax of row t over s <= t
        float* row = p + int64_t{t} * T;
        float mx = row[0];
        for (int s = 1; s <= t; ++s) mx = row[s] > mx ? row[s] : mx;
        float sum = 0.0f;
        for (int s = 0; s <= t; ++s) {
          row[s] = std::exp(row[s] - mx);
          sum += row[s];
        }
        const float inv = 1.0f / sum;
        for (int s = 0; s <= t; ++s) row[s] *= inv;
        for (int s = t + 1; s < T; ++s) row[s] = 0.0f;
      }
      // out (T, hs) = P (T, T) V (T, hs), into columns [h hs, (h+1) hs) of out (T, C)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, v, C3, 0.0f,
                  out + int64_t{b} * T * C + h * hs, C);
    }
  }
}

void Attention::backward(const OpContext& ctx, const float* const* in, const float*,
                         const float* dout, const GradOut* din, int batch) {
  float* dqkv_all = din[0].data;
  if (!dqkv_all) return;
  const float beta = din[0].accumulate ? 1.0f : 0.0f;
  const int T = t_, C = c_, C3 = 3 * c_, hs = hs_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  float* dp = ctx.workspace;  // (T, T)
  for (int b = 0; b < batch; ++b) {
    const float* qkv = in[0] + int64_t{b} * T * C3;
    float* dqkv = dqkv_all + int64_t{b} * T * C3;
    for (int h = 0; h < heads_; ++h) {
      const float* q = qkv + h * hs;
      const float* k = qkv + C + h * hs;
      const float* v = qkv + 2 * C + h * hs;
      const float* p = probs_.data() + (int64_t{b} * heads_ + h) * T * T;
      const float* dy = dout + int64_t{b} * T * C + h * hs;  // (T, hs), row stride C
      // dV (T, hs) = P^T (T, T) dOut (T, hs)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, dy, C, beta,
                  dqkv + 2 * C + h * hs, C3);
      // dP (T, T) = dOut (T, hs) V^T (hs, T)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, C3, 0.0f, dp,
                  T);
      // dS = P (dP - rowsum(dP P)) scale, in place in dp (zero above the diagonal: P is)
      for (int t = 0; t < T; ++t) {
        const float* pr = p + int64_t{t} * T;
        float* dr = dp + int64_t{t} * T;
        float dot = 0.0f;
        for (int s = 0; s <= t; ++s) dot += dr[s] * pr[s];
        for (int s = 0; s <= t; ++s) dr[s] = pr[s] * (dr[s] - dot) * scale;
        for (int s = t + 1; s < T; ++s) dr[s] = 0.0f;
      }
      // dQ (T, hs) = dS (T, T) K (T, hs);  dK (T, hs) = dS^T (T, T) Q (T, hs)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, dp, T, k, C3, beta,
                  dqkv + h * hs, C3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, dp, T, q, C3, beta,
                  dqkv + C + h * hs, C3);
    }
  }
}

}  // namespace dltune::engine
