// Pooling over square windows with stride and zero padding (PyTorch semantics), and adaptive
// average pooling to a fixed output size.
//
// Output size: floor((H + 2 pad - K) / stride) + 1, or with ceil_mode rounded up as long as the
// last window starts inside the input or its left padding. Max pooling takes the largest value
// inside the input (padding never wins). Average pooling divides by the window's size within the
// padded input (count_include_pad, PyTorch's default and Caffe's behaviour) or by the number of
// real pixels it covers (count_include_pad false); windows that ceil_mode lets run past the
// padding count only the part inside it. Adaptive average pooling averages rows
// [floor(i H / OH), ceil((i + 1) H / OH)) and the same for columns.
#pragma once

#include <vector>

#include "engine/ops/op.h"

namespace dltune::engine {

class Pool2d final : public Op {
 public:
  enum class Mode { kMax, kAvg, kAdaptiveAvg };
  void reserve(int max_batch) override;
  void release() override { argmax_ = {}; }
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;

 protected:
  Status configure() override;

 private:
  // The input rows [h0, h1) and columns [w0, w1) of output (oh, ow), and the divisor of an
  // average over it.
  struct Window {
    int h0, h1, w0, w1;
    float inv;
  };
  Window window(int oh, int ow) const;
  // Planes [p0, p1) of the batch (image-major: plane = image * C + channel). forward_max2x2:
  // 2x2 windows, stride 2, no padding, max or average (fast2x2_).
  void forward_max2x2(const float* in, float* out, int p0, int p1);
  void forward_planes(const float* in, float* out, int p0, int p1);
  void backward_planes(const float* dout, float* din, int p0, int p1) const;
  int64_t plane_tasks(int planes) const;  // the threads' ranges of planes (by shape)

  Mode mode_ = Mode::kMax;
  int k_ = 1, stride_ = 1, pad_ = 0;
  bool count_include_pad_ = true;
  int c_ = 0, h_ = 0, w_ = 0, oh_ = 0, ow_ = 0;
  bool fast2x2_ = false;
  std::vector<int32_t> argmax_;  // (B, C, OH, OW): index within the input plane (max mode)
};

}  // namespace dltune::engine
