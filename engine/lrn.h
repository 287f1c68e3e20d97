// Local response normalization across channels (Caffe's ACROSS_CHANNELS, PyTorch's
// LocalResponseNorm):
//   scale_c = k + alpha/size * sum_{c' in [c - size/2, c + (size-1)/2]} x_c'^2
//   y_c     = x_c * scale_c^-beta
#pragma once

#include "engine/layer.h"

namespace dltune::engine {

class Lrn final : public Layer {
 public:
  Lrn(int size, float alpha, float beta, float k)
      : size_(size), alpha_(alpha), beta_(beta), k_(k) {}
  const char* kind() const override { return "lrn"; }
  Result<Dims> setup(const Dims& in) override;
  void reserve(int max_batch) override;
  void release() override { scale_.resize(0); }
  void forward(const LayerContext& ctx, const float* in, float* out, int batch) override;
  void backward(const LayerContext& ctx, const float* in, const float* out, const float* dout,
                float* din, int batch) override;

 private:
  int size_;
  float alpha_, beta_, k_;
  Buffer scale_;  // (B, C, H, W) saved by forward for backward
  Buffer ratio_;  // (C, H, W) backward scratch: dy*y/s
};

}  // namespace dltune::engine
