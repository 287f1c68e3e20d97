// Element-wise ops and reshapes: ReLU, GELU (tanh form), dropout, flatten. Each maps
// in (B, S) -> out (B, S') with S' = S except flatten's (one dimension of the same size).
#pragma once

#include "engine/core/tensor.h"
#include "engine/ops/op.h"

namespace dltune::engine {

// y = max(x, 0). Backward uses the output (y > 0).
class Relu final : public Op {
 public:
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;
};

// GPT-2's GELU: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Backward uses the input.
class Gelu final : public Op {
 public:
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;
};

// Inverted dropout: in training, each element is zeroed with probability p and the rest are
// scaled by 1/(1-p); in evaluation it is the identity. The mask depends only on ctx.seed and
// the element index (engine/core/counter_hash.h), so the same seed reproduces the same mask
// (checkpoint resume, gradient checks) and the GPU dropout draws exactly the same one.
class Dropout final : public Op {
 public:
  void reserve(int max_batch) override;
  void release() override {
    mask_.resize(0);
    mask_valid_ = false;
  }
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;

 private:
  Buffer mask_;  // (B, S): 0 or 1/(1-p)
  bool mask_valid_ = false;
};

// (B, S) -> (B, numel(S)); the data is copied unchanged.
class Flatten final : public Op {
 public:
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;
};

}  // namespace dltune::engine
