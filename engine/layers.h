// Element-wise and fully connected layers: linear, ReLU, dropout, flatten.
#pragma once

#include <vector>

#include "engine/layer.h"

namespace dltune::engine {

// y = x W^T + b; W (out, in) then b (out) in the flat buffer (PyTorch's layout).
// Input of any per-sample shape is treated as flat (in = C*H*W).
class Linear final : public Layer {
 public:
  explicit Linear(int out_features) : out_features_(out_features) {}
  const char* kind() const override { return "linear"; }
  Result<Dims> setup(const Dims& in) override;
  int64_t num_params() const override;
  void init_params(Rng& rng) override;
  void forward(const LayerContext& ctx, const float* in, float* out, int batch) override;
  void backward(const LayerContext& ctx, const float* in, const float* out, const float* dout,
                float* din, int batch) override;

 private:
  int out_features_;
  int in_features_ = 0;
};

// y = max(x, 0). Backward uses the output (y > 0), so it can run after in-place use.
class Relu final : public Layer {
 public:
  const char* kind() const override { return "relu"; }
  Result<Dims> setup(const Dims& in) override;
  void forward(const LayerContext& ctx, const float* in, float* out, int batch) override;
  void backward(const LayerContext& ctx, const float* in, const float* out, const float* dout,
                float* din, int batch) override;
};

// Inverted dropout: in training, each element is zeroed with probability p and the rest are
// scaled by 1/(1-p); in evaluation it is the identity. The mask depends only on ctx.seed and
// the element index (engine/gpu/counter_hash.h), so the same seed reproduces the same mask
// (checkpoint resume, gradient checks) and the GPU dropout draws exactly the same one.
class Dropout final : public Layer {
 public:
  explicit Dropout(float p) : p_(p) {}
  const char* kind() const override { return "dropout"; }
  Result<Dims> setup(const Dims& in) override;
  void reserve(int max_batch) override;
  void release() override {
    mask_.resize(0);
    mask_valid_ = false;
  }
  void forward(const LayerContext& ctx, const float* in, float* out, int batch) override;
  void backward(const LayerContext& ctx, const float* in, const float* out, const float* dout,
                float* din, int batch) override;

 private:
  float p_;
  Buffer mask_;  // (B, C*H*W): 0 or 1/(1-p)
  bool mask_valid_ = false;
};

// (C, H, W) -> (C*H*W); data is unchanged (a copy in NCHW order).
class Flatten final : public Layer {
 public:
  const char* kind() const override { return "flatten"; }
  Result<Dims> setup(const Dims& in) override;
  void forward(const LayerContext& ctx, const float* in, float* out, int batch) override;
  void backward(const LayerContext& ctx, const float* in, const float* out, const float* dout,
                float* din, int batch) override;
};

}  // namespace dltune::engine
