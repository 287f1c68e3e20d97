#include "engine/ops/combine.h"

#include <algorithm>
#include <cstring>

namespace dltune::engine {

// ---- Add -----------------------------------------------------------------------------------

void Add::forward(const OpContext&, const float* const* in, float* out, int batch) {
  const int64_t n = batch * out_numel();
  const float* a = in[0];
  const float* b = in[1];
  if (relu_ && in_.size() == 2) {  // one pass: a residual block's output
    for (int64_t i = 0; i < n; ++i) out[i] = std::max(a[i] + b[i], 0.0f);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  for (size_t k = 2; k < in_.size(); ++k)
    for (int64_t i = 0; i < n; ++i) out[i] += in[k][i];
  if (relu_)
    for (int64_t i = 0; i < n; ++i) out[i] = std::max(out[i], 0.0f);
}

void Add::backward(const OpContext&, const float* const*, const float* out, const float* dout,
                   const GradOut* din, int batch) {
  const int64_t n = batch * out_numel();
  if (!relu_) {
    for (size_t k = 0; k < in_.size(); ++k)
      if (din[k].data) store_grad(din[k].data, dout, n, din[k].accumulate);
    return;
  }
  // The ReLU's gradient, masked by its output, a block at a time (in L1) to every input.
  constexpr int64_t kBlock = 1024;
  float g[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t len = std::min(kBlock, n - i0);
    for (int64_t i = 0; i < len; ++i) {  // both loads unconditional: a vector blend (Relu's)
      const float d = dout[i0 + i];
      g[i] = out[i0 + i] > 0.0f ? d : 0.0f;
    }
    for (size_t k = 0; k < in_.size(); ++k)
      if (din[k].data) store_grad(din[k].data + i0, g, len, din[k].accumulate);
  }
}

// ---- Concat --------------------------------------------------------------------------------

void Concat::forward(const OpContext&, const float* const* in, float* out, int batch) {
  const int64_t per_out = out_numel();
  int64_t offset = 0;
  for (size_t k = 0; k < in_.size(); ++k) {
    const int64_t per_in = in_numel(k);
    for (int b = 0; b < batch; ++b)
      std::memcpy(out + b * per_out + offset, in[k] + b * per_in, sizeof(float) * per_in);
    offset += per_in;
  }
}

void Concat::backward(const OpContext&, const float* const*, const float*, const float* dout,
                      const GradOut* din, int batch) {
  const int64_t per_out = out_numel();
  int64_t offset = 0;
  for (size_t k = 0; k < in_.size(); ++k) {
    const int64_t per_in = in_numel(k);
    if (din[k].data)
      for (int b = 0; b < batch; ++b)
        store_grad(din[k].data + b * per_in, dout + b * per_out + offset, per_in,
                   din[k].accumulate);
    offset += per_in;
  }
}

// ---- PadChannels ---------------------------------------------------------------------------

Status PadChannels::configure() {
  c_ = static_cast<int>(in_[0][0]);
  h_ = static_cast<int>(in_[0][1]);
  w_ = static_cast<int>(in_[0][2]);
  oc_ = static_cast<int>(out_[0]);
  oh_ = static_cast<int>(out_[1]);
  ow_ = static_cast<int>(out_[2]);
  stride_ = static_cast<int>(attrs().stride);
  before_ = (oc_ - c_) / 2;
  return ok_status();
}

void PadChannels::forward(const OpContext&, const float* const* in, float* out, int batch) {
  const int64_t plane = int64_t{oh_} * ow_;
  std::memset(out, 0, sizeof(float) * batch * out_numel());
  for (int b = 0; b < batch; ++b) {
    for (int c = 0; c < c_; ++c) {
      const float* src = in[0] + (int64_t{b} * c_ + c) * h_ * w_;
      float* dst = out + (int64_t{b} * oc_ + before_ + c) * plane;
      for (int y = 0; y < oh_; ++y)
        for (int x = 0; x < ow_; ++x) dst[y * ow_ + x] = src[y * stride_ * w_ + x * stride_];
    }
  }
}

void PadChannels::backward(const OpContext&, const float* const*, const float*, const float* dout,
                           const GradOut* din, int batch) {
  float* dx = din[0].data;
  if (!dx) return;
  const int64_t plane = int64_t{oh_} * ow_;
  if (!din[0].accumulate) std::memset(dx, 0, sizeof(float) * batch * in_numel());
  for (int b = 0; b < batch; ++b) {
    for (int c = 0; c < c_; ++c) {
      float* dst = dx + (int64_t{b} * c_ + c) * h_ * w_;
      const float* src = dout + (int64_t{b} * oc_ + before_ + c) * plane;
      for (int y = 0; y < oh_; ++y)
        for (int x = 0; x < ow_; ++x) dst[y * stride_ * w_ + x * stride_] += src[y * ow_ + x];
    }
  }
}

}  // namespace dltune::engine
