#include "engine/ops/pool.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "engine/core/parallel.h"

// Every (image, channel) plane is independent: the threads take ranges of planes.

namespace dltune::engine {

Status Pool2d::configure() {
  const recipes::OpAttrs& a = attrs();
  mode_ = node_.op == recipes::OpKind::kMaxPool   ? Mode::kMax
          : node_.op == recipes::OpKind::kAvgPool ? Mode::kAvg
                                                  : Mode::kAdaptiveAvg;
  k_ = static_cast<int>(a.kernel);
  stride_ = static_cast<int>(a.stride);
  pad_ = static_cast<int>(a.pad);
  count_include_pad_ = a.count_include_pad;
  c_ = static_cast<int>(in_[0][0]);
  h_ = static_cast<int>(in_[0][1]);
  w_ = static_cast<int>(in_[0][2]);
  oh_ = static_cast<int>(out_[1]);
  ow_ = static_cast<int>(out_[2]);
  fast2x2_ = (mode_ == Mode::kMax || mode_ == Mode::kAvg) && k_ == 2 && stride_ == 2 && pad_ == 0 &&
             2 * oh_ <= h_ && 2 * ow_ <= w_;
  return ok_status();
}

void Pool2d::reserve(int max_batch) {
  if (mode_ == Mode::kMax) argmax_.resize(static_cast<size_t>(max_batch * out_numel()));
}

Pool2d::Window Pool2d::window(int oh, int ow) const {
  if (mode_ == Mode::kAdaptiveAvg) {
    Window w{oh * h_ / oh_, ((oh + 1) * h_ + oh_ - 1) / oh_, ow * w_ / ow_,
             ((ow + 1) * w_ + ow_ - 1) / ow_, 0.0f};
    w.inv = 1.0f / static_cast<float>((w.h1 - w.h0) * (w.w1 - w.w0));
    return w;
  }
  int h0 = oh * stride_ - pad_, w0 = ow * stride_ - pad_;
  int h1 = std::min(h0 + k_, h_ + pad_), w1 = std::min(w0 + k_, w_ + pad_);
  const int padded = (h1 - h0) * (w1 - w0);
  h0 = std::max(h0, 0);
  w0 = std::max(w0, 0);
  h1 = std::min(h1, h_);
  w1 = std::min(w1, w_);
  const int real = (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, 1.0f / static_cast<float>(count_include_pad_ ? padded : real)};
}

// The common case (LeNet, VGG-style): 2x2 windows, stride 2, no padding; no bounds checks.
void Pool2d::forward_max2x2(const float* in, float* out, int p0, int p1) {
  const int H = h_, W = w_, OH = oh_, OW = ow_;
  if (mode_ == Mode::kAvg) {  // LeNet-5's: the generic loop's sum, in its order, / 4
    for (int p = p0; p < p1; ++p) {
      const float* src = in + int64_t{p} * H * W;
      float* dst = out + int64_t{p} * OH * OW;
      for (int oh = 0; oh < OH; ++oh) {
        const float* r0 = src + 2 * oh * W;
        const float* r1 = r0 + W;
        for (int ow = 0; ow < OW; ++ow) {
          const int c = 2 * ow;
          dst[oh * OW + ow] = (((r0[c] + r0[c + 1]) + r1[c]) + r1[c + 1]) * 0.25f;
        }
      }
    }
    return;
  }
  for (int p = p0; p < p1; ++p) {
    const float* src = in + int64_t{p} * H * W;
    float* dst = out + int64_t{p} * OH * OW;
    int32_t* arg = argmax_.data() + int64_t{p} * OH * OW;
    for (int oh = 0; oh < OH; ++oh) {
      const float* r0 = src + 2 * oh * W;
      const float* r1 = r0 + W;
      for (int ow = 0; ow < OW; ++ow) {
        const int c = 2 * ow;
        float best = r0[c];
        int32_t bi = 2 * oh * W + c;
        if (r0[c + 1] > best) best = r0[c + 1], bi = 2 * oh * W + c + 1;
        if (r1[c] > best) best = r1[c], bi = (2 * oh + 1) * W + c;
        if (r1[c + 1] > best) best = r1[c + 1], bi = (2 * oh + 1) * W + c + 1;
        dst[oh * OW + ow] = best;
        arg[oh * OW + ow] = bi;
      }
    }
  }
}

int64_t Pool2d::plane_tasks(int planes) const {
  return task_count(planes, static_cast<double>(h_) * w_, 16384.0);
}

void Pool2d::forward(const OpContext& ctx, const float* const* inputs, float* out, int batch) {
  // in (B, C, H, W) -> out (B, C, OH, OW); each (b, c) plane independently
  const float* in = inputs[0];
  const int planes = batch * c_;
  parallel_ranges(*ctx.pool, planes, plane_tasks(planes), [&](int64_t p0, int64_t p1, int) {
    if (fast2x2_) return forward_max2x2(in, out, static_cast<int>(p0), static_cast<int>(p1));
    forward_planes(in, out, static_cast<int>(p0), static_cast<int>(p1));
  });
}

void Pool2d::forward_planes(const float* in, float* out, int p0, int p1) {
  for (int p = p0; p < p1; ++p) {
    const float* src = in + int64_t{p} * h_ * w_;
    float* dst = out + int64_t{p} * oh_ * ow_;
    int32_t* arg = mode_ == Mode::kMax ? argmax_.data() + int64_t{p} * oh_ * ow_ : nullptr;
    for (int oh = 0; oh < oh_; ++oh) {
      for (int ow = 0; ow < ow_; ++ow) {
        const Window win = window(oh, ow);
        if (mode_ == Mode::kMax) {
          float best = -std::numeric_limits<float>::infinity();
          int32_t bi = -1;
          for (int h = win.h0; h < win.h1; ++h)
            for (int w = win.w0; w < win.w1; ++w)
              if (src[h * w_ + w] > best || bi < 0) best = src[h * w_ + w], bi = h * w_ + w;
          dst[oh * ow_ + ow] = best;
          arg[oh * ow_ + ow] = bi;
        } else {
          float s = 0.0f;
          for (int h = win.h0; h < win.h1; ++h)
            for (int w = win.w0; w < win.w1; ++w) s += src[h * w_ + w];
          dst[oh * ow_ + ow] = s * win.inv;
        }
      }
    }
  }
}

void Pool2d::backward(const OpContext& ctx, const float* const*, const float*, const float* dout,
                      const GradOut* grad, int batch) {
  float* din = grad[0].data;
  if (!din) return;
  const int planes = batch * c_;
  const bool acc = grad[0].accumulate;
  parallel_ranges(*ctx.pool, planes, plane_tasks(planes), [&](int64_t p0, int64_t p1, int) {
    if (!acc) std::memset(din + p0 * h_ * w_, 0, sizeof(float) * (p1 - p0) * h_ * w_);
    backward_planes(dout, din, static_cast<int>(p0), static_cast<int>(p1));
  });
}

void Pool2d::backward_planes(const float* dout, float* din, int p0, int p1) const {
  for (int p = p0; p < p1; ++p) {
    float* dst = din + int64_t{p} * h_ * w_;
    const float* d = dout + int64_t{p} * oh_ * ow_;
    if (mode_ == Mode::kMax) {
      const int32_t* arg = argmax_.data() + int64_t{p} * oh_ * ow_;
      for (int i = 0; i < oh_ * ow_; ++i) dst[arg[i]] += d[i];
      continue;
    }
    if (fast2x2_) {  // windows that do not overlap: each pixel gets its window's share once
      for (int oh = 0; oh < oh_; ++oh) {
        float* r0 = dst + 2 * oh * w_;
        float* r1 = r0 + w_;
        for (int ow = 0; ow < ow_; ++ow) {
          const float g = d[oh * ow_ + ow] * 0.25f;
          const int c = 2 * ow;
          r0[c] += g, r0[c + 1] += g, r1[c] += g, r1[c + 1] += g;
        }
      }
      continue;
    }
    for (int oh = 0; oh < oh_; ++oh) {
      for (int ow = 0; ow < ow_; ++ow) {
        const Window win = window(oh, ow);
        const float g = d[oh * ow_ + ow] * win.inv;
        for (int h = win.h0; h < win.h1; ++h)
          for (int w = win.w0; w < win.w1; ++w) dst[h * w_ + w] += g;
      }
    }
  }
}

}  // namespace dltune::engine
