#include "engine/ops/combine.h"

#include <algorithm>
#include <cstring>

#include "engine/core/parallel.h"

// Element-wise and per-sample loops: any split over the threads gives the same bits.

namespace dltune::engine {

// ---- Add -----------------------------------------------------------------------------------

void Add::forward(const OpContext& ctx, const float* const* in, float* out, int batch) {
  const float* a = in[0];
  const float* b = in[1];
  parallel_elements(*ctx.pool, batch * out_numel(), [&](int64_t i0, int64_t i1, int) {
    if (relu_ && in_.size() == 2) {  // one pass: a residual block's output
      for (int64_t i = i0; i < i1; ++i) out[i] = std::max(a[i] + b[i], 0.0f);
      return;
    }
    for (int64_t i = i0; i < i1; ++i) out[i] = a[i] + b[i];
    for (size_t k = 2; k < in_.size(); ++k)
      for (int64_t i = i0; i < i1; ++i) out[i] += in[k][i];
    if (relu_)
      for (int64_t i = i0; i < i1; ++i) out[i] = std::max(out[i], 0.0f);
  });
}

void Add::backward(const OpContext& ctx, const float* const*, const float* out, const float* dout,
                   const GradOut* din, int batch) {
  const int64_t n = batch * out_numel();
  if (!relu_) {
    for (size_t k = 0; k < in_.size(); ++k)
      if (din[k].data) store_grad(*ctx.pool, din[k].data, dout, n, din[k].accumulate);
    return;
  }
  // The ReLU's gradient, masked by its output, a block at a time (in L1) to every input.
  parallel_elements(*ctx.pool, n, [&](int64_t r0, int64_t r1, int) {
    constexpr int64_t kBlock = 1024;
    float g[kBlock];
    for (int64_t i0 = r0; i0 < r1; i0 += kBlock) {
      const int64_t len = std::min(kBlock, r1 - i0);
      for (int64_t i = 0; i < len; ++i) {  // both loads unconditional: a vector blend (Relu's)
        const float d = dout[i0 + i];
        g[i] = out[i0 + i] > 0.0f ? d : 0.0f;
      }
      for (size_t k = 0; k < in_.size(); ++k)
        if (din[k].data) store_grad(din[k].data + i0, g, len, din[k].accumulate);
    }
  });
}

// ---- Concat --------------------------------------------------------------------------------

void Concat::forward(const OpContext& ctx, const float* const* in, float* out, int batch) {
  const int64_t per_out = out_numel();
  ctx.pool->run(batch, [&](int64_t b, int) {
    int64_t offset = 0;
    for (size_t k = 0; k < in_.size(); ++k) {
      const int64_t per_in = in_numel(k);
      std::memcpy(out + b * per_out + offset, in[k] + b * per_in, sizeof(float) * per_in);
      offset += per_in;
    }
  });
}

void Concat::backward(const OpContext& ctx, const float* const*, const float*, const float* dout,
                      const GradOut* din, int batch) {
  const int64_t per_out = out_numel();
  ctx.pool->run(batch, [&](int64_t b, int) {
    int64_t offset = 0;
    for (size_t k = 0; k < in_.size(); ++k) {
      const int64_t per_in = in_numel(k);
      if (din[k].data)
        store_grad(din[k].data + b * per_in, dout + b * per_out + offset, per_in,
                   din[k].accumulate);
      offset += per_in;
    }
  });
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

void PadChannels::forward(const OpContext& ctx, const float* const* in, float* out, int batch) {
  const int64_t plane = int64_t{oh_} * ow_;
  ctx.pool->run(batch, [&](int64_t b, int) {
    std::memset(out + b * out_numel(), 0, sizeof(float) * out_numel());
    for (int c = 0; c < c_; ++c) {
      const float* src = in[0] + (int64_t{b} * c_ + c) * h_ * w_;
      float* dst = out + (int64_t{b} * oc_ + before_ + c) * plane;
      for (int y = 0; y < oh_; ++y)
        for (int x = 0; x < ow_; ++x) dst[y * ow_ + x] = src[y * stride_ * w_ + x * stride_];
    }
  });
}

void PadChannels::backward(const OpContext& ctx, const float* const*, const float*,
                           const float* dout, const GradOut* din, int batch) {
  float* dx = din[0].data;
  if (!dx) return;
  const int64_t plane = int64_t{oh_} * ow_;
  const bool acc = din[0].accumulate;
  ctx.pool->run(batch, [&](int64_t b, int) {
    if (!acc) std::memset(dx + b * in_numel(), 0, sizeof(float) * in_numel());
    for (int c = 0; c < c_; ++c) {
      float* dst = dx + (int64_t{b} * c_ + c) * h_ * w_;
      const float* src = dout + (int64_t{b} * oc_ + before_ + c) * plane;
      for (int y = 0; y < oh_; ++y)
        for (int x = 0; x < ow_; ++x) dst[y * stride_ * w_ + x * stride_] += src[y * ow_ + x];
    }
  });
}

}  // namespace dltune::engine
