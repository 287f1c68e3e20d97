// Fully connected: y = x W^T + b over the last dimension, W (out, in) then b (out) in PyTorch's
// layout. The rows are every sample's positions: in (B, ..., I) -> out (B, ..., O), so one GEMM
// covers a whole batch of sequences. With the `flatten` attribute (a `layers:` chain) the whole
// per-sample input is one row of I = numel features. Without `bias` there is no b; with `tie`
// the weight is another node's tensor (GPT's head reads the token embedding), and its gradient
// is added to that node's.
//
// On the rank's threads: every product is a parallel_sgemm (engine/core/gemm.h: a grid of
// blocks fixed by the shapes, K never split); the same bits on any number of threads. In bf16
// (engine/core/precision.h) the products read bf16-rounded copies of their operands (in the
// workspace; the weights in the op's own buffer) and their results are rounded to bf16.
#pragma once

#include "engine/core/tensor.h"
#include "engine/ops/op.h"

namespace dltune::engine {

class Linear final : public Op {
 public:
  // "blas": OpenBLAS (engine/core/gemm.h); "onednn": oneDNN's matmul (engine/ops/onednn.h),
  // on the same blocks, where the build has it.
  std::vector<std::string> kernels() const override;
  void reserve(int max_batch) override;
  void release() override { bf16_w_.resize(0); }
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;

 protected:
  Status configure() override;

 private:
  // The products on explicit operands: out (R, O) = x W^T + b; dW, db, dx of dy.
  void forward_on(const OpContext& ctx, const float* x, const float* w, const float* b, float* out,
                  int64_t R) const;
  void backward_on(const OpContext& ctx, const float* x, const float* w, const float* dy, float* dw,
                   bool dw_acc, float* db, bool db_acc, float* dx, bool dx_acc, int64_t R) const;
  int64_t weight_floats() const { return out_features_ * in_features_; }
  // C (M, N) (+)= op(A) op(B) on this node's kernel.
  void product(const OpContext& ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
               const float* A, int64_t lda, const float* B, int64_t ldb, bool acc, float* C,
               int64_t ldc) const;
  void use_kernel(const std::string& name) override { onednn_ = name == "onednn"; }
  bool onednn_ = false;
  int64_t in_features_ = 0, out_features_ = 0, rows_per_sample_ = 1;
  Buffer bf16_w_;  // bf16: the rounded weight (O, I) and bias (O)
};

}  // namespace dltune::engine
