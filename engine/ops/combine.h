// Ops that join or reshape tensors without parameters: residual add, channel concatenation and
// the CIFAR ResNets' parameter-free shortcut.
//
//   add:          in[k] (B, S) ... -> out (B, S) = sum_k in[k];       din[k] = dout
//                 with a fused ReLU (a residual block's output): out = max(0, sum_k in[k]),
//                 din[k] = dout where out > 0, else 0
//   concat:       in[k] (B, C_k, S) ... -> out (B, sum C_k, S), in order; din[k] = its slice
//   pad_channels: in (B, C, H, W) -> out (B, C', ceil(H/s), ceil(W/s)) = in[:, :, ::s, ::s]
//                 with (C' - C)/2 zero channels before and after (He et al.'s option A)
#pragma once

#include "engine/ops/op.h"

namespace dltune::engine {

class Add final : public Op {
 public:
  bool fuse_relu() override {
    relu_ = true;
    return true;
  }
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;

 private:
  bool relu_ = false;  // a ReLU fused in (fuse_relu())
};

class Concat final : public Op {
 public:
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;
};

class PadChannels final : public Op {
 public:
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;

 protected:
  Status configure() override;

 private:
  int c_ = 0, h_ = 0, w_ = 0, oc_ = 0, oh_ = 0, ow_ = 0, stride_ = 1, before_ = 0;
};

}  // namespace dltune::engine
