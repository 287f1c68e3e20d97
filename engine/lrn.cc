#include "engine/lrn.h"

#include <algorithm>
#include <cmath>

namespace dltune::engine {

Result<Dims> Lrn::setup(const Dims& in) {
  if (size_ <= 0) return invalid_input("lrn: size must be positive, got " + std::to_string(size_));
  if (!(k_ > 0.0f) || !(alpha_ >= 0.0f) || !(beta_ >= 0.0f))
    return invalid_input("lrn: k must be positive and alpha, beta non-negative");
  in_ = out_ = in;
  return out_;
}

void Lrn::reserve(int max_batch) {
  scale_.reserve(static_cast<size_t>(max_batch * in_.size()));
  ratio_.reserve(static_cast<size_t>(in_.size()));
}

void Lrn::forward(const LayerContext&, const float* in, float* out, int batch) {
  // in (B, C, H, W) -> out (B, C, H, W); the window runs over channels at each pixel
  const int C = in_.c;
  const int64_t HW = int64_t{in_.h} * in_.w;
  const int lo = size_ / 2, hi = (size_ - 1) / 2;
  const float a = alpha_ / static_cast<float>(size_);
  for (int n = 0; n < batch; ++n) {
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
  }
}

void Lrn::backward(const LayerContext&, const float* in, const float* out, const float* dout,
                   float* din, int batch) {
  // dx_i = dy_i * s_i^-beta - (2 alpha beta / size) * x_i * sum_{j: i in win(j)} dy_j y_j / s_j
  if (!din) return;
  const int C = in_.c;
  const int64_t HW = int64_t{in_.h} * in_.w;
  const int lo = size_ / 2, hi = (size_ - 1) / 2;
  const float f = 2.0f * alpha_ * beta_ / static_cast<float>(size_);
  float* ratio = ratio_.data();  // (C, H, W): dy*y/s
  for (int n = 0; n < batch; ++n) {
    const int64_t off = n * C * HW;
    const float *x = in + off, *y = out + off, *dy = dout + off, *s = scale_.data() + off;
    float* dx = din + off;
    for (int64_t i = 0; i < C * HW; ++i) ratio[i] = dy[i] * y[i] / s[i];
    for (int c = 0; c < C; ++c) {
      // j's window contains c  <=>  j - lo <= c <= j + hi  <=>  c - hi <= j <= c + lo
      float* dxc = dx + c * HW;
      const float *xc = x + c * HW, *sc = s + c * HW, *dyc = dy + c * HW;
      for (int64_t p = 0; p < HW; ++p) dxc[p] = 0.0f;
      for (int j = std::max(0, c - hi); j <= std::min(C - 1, c + lo); ++j) {
        const float* rj = ratio + j * HW;
        for (int64_t p = 0; p < HW; ++p) dxc[p] += rj[p];
      }
      for (int64_t p = 0; p < HW; ++p)
        dxc[p] = dyc[p] * std::pow(sc[p], -beta_) - f * xc[p] * dxc[p];
    }
  }
}

}  // namespace dltune::engine
