// Fully connected: y = x W^T + b over the last dimension, W (out, in) then b (out) in PyTorch's
// layout. The rows are every sample's positions: in (B, ..., I) -> out (B, ..., O), so one GEMM
// covers a whole batch of sequences. With the `flatten` attribute (a `layers:` chain) the whole
// per-sample input is one row of I = numel features. Without `bias` there is no b; with `tie`
// the weight is another node's tensor (GPT's head reads the token embedding), and its gradient
// is added to that node's.
#pragma once

#include "engine/ops/op.h"

namespace dltune::engine {

class Linear final : public Op {
 public:
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;

 protected:
  Status configure() override;

 private:
  int64_t in_features_ = 0, out_features_ = 0, rows_per_sample_ = 1;
};

}  // namespace dltune::engine
