#include "engine/ops/lrn.h"

#include <algorithm>
#include <cmath>

namespace dltune::engine {

Status Lrn::configure() {
  const recipes::OpAttrs& a = attrs();
  size_ = static_cast<int>(a.size);
  alpha_ = static_cast<float>(a.alpha);
  beta_ = static_cast<float>(a.beta);
  k_ = static_cast<float>(a.k);
  c_ = static_cast<int>(in_[0][0]);
  hw_ = in_[0][1] * in_[0][2];
  return ok_status();
}

void Lrn::reserve(int max_batch) {
  scale_.reserve(static_cast<size_t>(max_batch * in_numel()));
  ratio_.reserve(static_cast<size_t>(threads_ * in_numel()));  // one per thread
  plane_.reserve(static_cast<size_t>(threads_ * hw_));
}

void Lrn::forward(const OpContext& ctx, const float* const* inputs, float* out, int batch) {
  // in (B, C, H, W) -> out (B, C, H, W); the window runs over channels at each pixel
  const float* in = inputs[0];
  const int C = c_;
  const int64_t HW = hw_;
  const int lo = size_ / 2, hi = (size_ - 1) / 2;
  const float a = alpha_ / static_cast<float>(size_);
  ctx.pool->run(batch, [&](int64_t n, int) {  // images are independent
    const float* x = in + n * C * HW;
    float* s = scale_.data() + n * C * HW;
    float* y = out + n * C * HW;
    for (int c = 0; c < C; ++c) {
      float* sc = s + c * HW;
      for (int64_t p = 0; p < HW; ++p) sc[p] = 0.0f;
      for (int j = std::max(0, c - lo); j <= std::min(C - 1, c + hi); ++j) {
        const float* xj = x + j * HW;
        for (int64_t p = 0; p < HW; ++p) sc[p] += xj[p] * xj[p];
      }
      const float* xc = x + c * HW;
      float* yc = y + c * HW;
      for (int64_t p = 0; p < HW; ++p) {
        sc[p] = k_ + a * sc[p];
        yc[p] = xc[p] * std::pow(sc[p], -beta_);
      }
    }
  });
}

void Lrn::backward(const OpContext& ctx, const float* const* inputs, const float* out,
                   const float* dout, const GradOut* grad, int batch) {
  // dx_i = dy_i * s_i^-beta - (2 alpha beta / size) * x_i * sum_{j: i in win(j)} dy_j y_j / s_j
  float* din = grad[0].data;
  if (!din) return;
  const float* in = inputs[0];
  const bool acc = grad[0].accumulate;
  const int C = c_;
  const int64_t HW = hw_;
  const int lo = size_ / 2, hi = (size_ - 1) / 2;
  const float f = 2.0f * alpha_ * beta_ / static_cast<float>(size_);
  ctx.pool->run(batch, [&](int64_t n, int thread) {  // images are independent
    float* ratio = ratio_.data() + thread * C * HW;  // (C, H, W): dy*y/s
    float* plane = plane_.data() + thread * HW;
    const int64_t off = n * C * HW;
    const float *x = in + off, *y = out + off, *dy = dout + off, *s = scale_.data() + off;
    float* dx = din + off;
    for (int64_t i = 0; i < C * HW; ++i) ratio[i] = dy[i] * y[i] / s[i];
    for (int c = 0; c < C; ++c) {
      // j's window contains c  <=>  j - lo <= c <= j + hi  <=>  c - hi <= j <= c + lo
      float* dxc = acc ? plane : dx + c * HW;
      const float *xc = x + c * HW, *sc = s + c * HW, *dyc = dy + c * HW;
      for (int64_t p = 0; p < HW; ++p) dxc[p] = 0.0f;
      for (int j = std::max(0, c - hi); j <= std::min(C - 1, c + lo); ++j) {
        const float* rj = ratio + j * HW;
        for (int64_t p = 0; p < HW; ++p) dxc[p] += rj[p];
      }
      for (int64_t p = 0; p < HW; ++p)
        dxc[p] = dyc[p] * std::pow(sc[p], -beta_) - f * xc[p] * dxc[p];
      if (acc) store_grad(dx + c * HW, dxc, HW, true);
    }
  });
}

}  // namespace dltune::engine
