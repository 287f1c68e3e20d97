// Normalisation: batch norm over channels (PyTorch's BatchNorm1d/2d) and layer norm over the
// last dimension (PyTorch's LayerNorm), both with a learned scale (weight) and shift (bias).
//
// Batch norm, in (B, C, S...) with N = B x numel(S) values per channel:
//   training:   mean, var = the batch's (biased var), y = (x - mean) / sqrt(var + eps) w + b;
//               running_mean = (1 - m) running_mean + m mean,
//               running_var  = (1 - m) running_var + m var N / (N - 1)   (unbiased, as PyTorch)
//               num_batches_tracked += 1
//   evaluation: the running statistics instead of the batch's.
//   backward (training): with xhat = (x - mean) / sqrt(var + eps),
//               dw = sum dy xhat, db = sum dy, dx = w / sqrt(var + eps) (dy - db/N - xhat dw/N)
// Statistics are per rank, as in PyTorch DDP (no synchronisation across ranks).
//
// Layer norm, in (R, C) rows: y = (x - mean_r) rstd_r w + b with rstd = 1 / sqrt(var_r + eps);
//   dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w.
#pragma once

#include "engine/core/tensor.h"
#include "engine/ops/op.h"

namespace dltune::engine {

class BatchNorm final : public Op {
 public:
  void reserve(int max_batch) override;
  bool fuse_relu() override {
    relu_ = true;
    return true;
  }
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;

 protected:
  Status configure() override;

 private:
  int64_t c_ = 0, s_ = 1;
  Buffer mean_, invstd_;  // (C) of the last forward: the batch's, or the running ones
  bool training_ = true;  // the mode of the last forward
  bool relu_ = false;     // a ReLU fused in (fuse_relu())
  template <bool kRelu>
  void backward_impl(const OpContext& ctx, const float* x, const float* dout, const GradOut* din,
                     int batch);
};

class LayerNorm final : public Op {
 public:
  void reserve(int max_batch) override;
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;

 protected:
  Status configure() override;

 private:
  int64_t row_blocks(int batch) const {  // the parameter gradients' fixed blocks of rows
    return layer_norm_row_blocks(batch * rows_, c_);
  }
  int64_t c_ = 0, rows_ = 1;  // features per row; rows per sample
  Buffer mean_, rstd_;        // (B x rows) of the last forward
};

}  // namespace dltune::engine
