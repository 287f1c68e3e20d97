#include "engine/pool.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace dltune::engine {

Result<Dims> Pool2d::setup(const Dims& in) {
  const char* name = kind();
  if (k_ <= 0 || stride_ <= 0 || pad_ < 0)
    return invalid_input(std::string(name) +
                         ": kernel and stride must be positive and padding non-negative");
  if (pad_ * 2 > k_)
    return invalid_input(std::string(name) + ": padding " + std::to_string(pad_) +
                         " must be at most half the kernel " + std::to_string(k_));
  if (in.h + 2 * pad_ < k_ || in.w + 2 * pad_ < k_)
    return invalid_input(std::string(name) + ": kernel " + std::to_string(k_) +
                         " does not fit input " + in.str());
  in_ = in;
  out_ = Dims{in.c, (in.h + 2 * pad_ - k_) / stride_ + 1, (in.w + 2 * pad_ - k_) / stride_ + 1};
  return out_;
}

void Pool2d::reserve(int max_batch) {
  if (mode_ == Mode::kMax) argmax_.resize(static_cast<size_t>(max_batch * out_.size()));
}

// The common case (LeNet, VGG-style): 2x2 windows, stride 2, no padding; no bounds checks.
void Pool2d::forward_max2x2(const float* in, float* out, int planes) {
  const int H = in_.h, W = in_.w, OH = out_.h, OW = out_.w;
  for (int p = 0; p < planes; ++p) {
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

void Pool2d::forward(const LayerContext&, const float* in, float* out, int batch) {
  // in (B, C, H, W) -> out (B, C, OH, OW); each (b, c) plane independently
  const int H = in_.h, W = in_.w, OH = out_.h, OW = out_.w;
  const int planes = batch * in_.c;
  const float inv = 1.0f / static_cast<float>(k_ * k_);
  if (mode_ == Mode::kMax && k_ == 2 && stride_ == 2 && pad_ == 0) {
    forward_max2x2(in, out, planes);
    return;
  }
  for (int p = 0; p < planes; ++p) {
    const float* src = in + int64_t{p} * H * W;
    float* dst = out + int64_t{p} * OH * OW;
    int32_t* arg = mode_ == Mode::kMax ? argmax_.data() + int64_t{p} * OH * OW : nullptr;
    for (int oh = 0; oh < OH; ++oh) {
      const int h0 = oh * stride_ - pad_, h1 = std::min(h0 + k_, H);
      for (int ow = 0; ow < OW; ++ow) {
        const int w0 = ow * stride_ - pad_, w1 = std::min(w0 + k_, W);
        if (mode_ == Mode::kMax) {
          float best = -std::numeric_limits<float>::infinity();
          int32_t bi = -1;
          for (int h = std::max(h0, 0); h < h1; ++h)
            for (int w = std::max(w0, 0); w < w1; ++w)
              if (src[h * W + w] > best || bi < 0) best = src[h * W + w], bi = h * W + w;
          dst[oh * OW + ow] = best;
          arg[oh * OW + ow] = bi;
        } else {
          float s = 0.0f;
          for (int h = std::max(h0, 0); h < h1; ++h)
            for (int w = std::max(w0, 0); w < w1; ++w) s += src[h * W + w];
          dst[oh * OW + ow] = s * inv;
        }
      }
    }
  }
}

void Pool2d::backward(const LayerContext&, const float*, const float*, const float* dout,
                      float* din, int batch) {
  if (!din) return;
  const int H = in_.h, W = in_.w, OH = out_.h, OW = out_.w;
  const int planes = batch * in_.c;
  const float inv = 1.0f / static_cast<float>(k_ * k_);
  std::memset(din, 0, sizeof(float) * batch * in_.size());
  for (int p = 0; p < planes; ++p) {
    float* dst = din + int64_t{p} * H * W;
    const float* d = dout + int64_t{p} * OH * OW;
    if (mode_ == Mode::kMax) {
      const int32_t* arg = argmax_.data() + int64_t{p} * OH * OW;
      for (int i = 0; i < OH * OW; ++i) dst[arg[i]] += d[i];
      continue;
    }
    for (int oh = 0; oh < OH; ++oh) {
      const int h0 = oh * stride_ - pad_, h1 = std::min(h0 + k_, H);
      for (int ow = 0; ow < OW; ++ow) {
        const int w0 = ow * stride_ - pad_, w1 = std::min(w0 + k_, W);
        const float g = d[oh * OW + ow] * inv;
        for (int h = std::max(h0, 0); h < h1; ++h)
          for (int w = std::max(w0, 0); w < w1; ++w) dst[h * W + w] += g;
      }
    }
  }
}

}  // namespace dltune::engine
