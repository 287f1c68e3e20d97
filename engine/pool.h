// Max and average pooling over square windows with stride and zero padding (PyTorch
// semantics, floor mode: OH = (H + 2*pad - K) / stride + 1). Average pooling counts the padding
// in the divisor (count_include_pad, PyTorch's default and Caffe's behaviour).
#pragma once

#include <vector>

#include "engine/layer.h"

namespace dltune::engine {

class Pool2d final : public Layer {
 public:
  enum class Mode { kMax, kAvg };
  Pool2d(Mode mode, int kernel, int stride, int pad)
      : mode_(mode), k_(kernel), stride_(stride), pad_(pad) {}
  const char* kind() const override { return mode_ == Mode::kMax ? "maxpool" : "avgpool"; }
  Result<Dims> setup(const Dims& in) override;
  void reserve(int max_batch) override;
  void release() override { argmax_ = {}; }
  void forward(const LayerContext& ctx, const float* in, float* out, int batch) override;
  void backward(const LayerContext& ctx, const float* in, const float* out, const float* dout,
                float* din, int batch) override;

 private:
  void forward_max2x2(const float* in, float* out, int planes);

  Mode mode_;
  int k_, stride_, pad_;
  std::vector<int32_t> argmax_;  // (B, C, OH, OW): index within the input plane (max mode)
};

}  // namespace dltune::engine
