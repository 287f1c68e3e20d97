// Local response normalization across channels (Caffe's ACROSS_CHANNELS, PyTorch's
// LocalResponseNorm):
//   scale_c = k + alpha/size * sum_{c' in [c - size/2, c + (size-1)/2]} x_c'^2
//   y_c     = x_c * scale_c^-beta
#pragma once

#include "engine/core/tensor.h"
#include "engine/ops/op.h"

namespace dltune::engine {

class Lrn final : public Op {
 public:
  void reserve(int max_batch) override;
  void release() override { scale_.resize(0); }
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;

 protected:
  Status configure() override;

 private:
  int size_ = 5, c_ = 0;
  int64_t hw_ = 0;
  float alpha_ = 0, beta_ = 0, k_ = 0;
  Buffer scale_;  // (B, C, H, W) saved by forward for backward
  Buffer ratio_;  // (threads, C, H, W) backward scratch: dy*y/s
  Buffer plane_;  // (threads, H, W) backward scratch: a channel's gradient before it is added
};

}  // namespace dltune::engine
