#include "engine/ops/linear.h"

#include <cstring>

#include <cblas.h>

namespace dltune::engine {

Status Linear::configure() {
  in_features_ = attrs().flatten ? in_numel() : in_[0].back();
  out_features_ = attrs().out;
  rows_per_sample_ = in_numel() / in_features_;
  return ok_status();
}

void Linear::forward(const OpContext&, const float* const* in, float* out, int batch) {
  // in (R, I), W (O, I), b (O) -> out (R, O) = in W^T + b, R = B x rows per sample
  const int64_t R = batch * rows_per_sample_, O = out_features_, I = in_features_;
  const float* W = params_[0];
  float beta = 0.0f;
  if (attrs().bias) {
    const float* b = params_[1];
    for (int64_t r = 0; r < R; ++r) std::memcpy(out + r * O, b, sizeof(float) * O);
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(R), static_cast<int>(O),
              static_cast<int>(I), 1.0f, in[0], static_cast<int>(I), W, static_cast<int>(I), beta,
              out, static_cast<int>(O));
}

void Linear::backward(const OpContext& ctx, const float* const* in, const float*, const float* dout,
                      const GradOut* din, int batch) {
  const int R = static_cast<int>(batch * rows_per_sample_);
  const int O = static_cast<int>(out_features_), I = static_cast<int>(in_features_);
  // dW (O, I) (+)= dout^T (O, R) x in (R, I)
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, O, I, R, 1.0f, dout, O, in[0], I,
              accumulate_grad(ctx, 0) ? 1.0f : 0.0f, grads_[0], I);
  if (attrs().bias) {
    float* db = grads_[1];  // (O) (+)= sum over rows of dout
    if (!accumulate_grad(ctx, 1)) std::memset(db, 0, sizeof(float) * O);
    for (int r = 0; r < R; ++r) {
      const float* d = dout + int64_t{r} * O;
      for (int o = 0; o < O; ++o) db[o] += d[o];
    }
  }
  // din (R, I) (+)= dout (R, O) x W (O, I)
  if (din[0].data)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, I, O, 1.0f, dout, O, params_[0], I,
                din[0].accumulate ? 1.0f : 0.0f, din[0].data, I);
}

}  // namespace dltune::engine
