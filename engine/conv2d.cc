#include "engine/conv2d.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <cblas.h>

namespace dltune::engine {

Result<Dims> Conv2d::setup(const Dims& in) {
  auto bad = [](const std::string& m) { return invalid_input("conv2d: " + m); };
  if (oc_ <= 0) return bad("output channels must be positive, got " + std::to_string(oc_));
  if (k_ <= 0 || stride_ <= 0 || pad_ < 0)
    return bad("kernel and stride must be positive and padding non-negative");
  if (groups_ <= 0) return bad("groups must be positive, got " + std::to_string(groups_));
  if (in.c % groups_ != 0)
    return bad(std::to_string(in.c) +
               " input channels are not divisible by groups=" + std::to_string(groups_));
  if (oc_ % groups_ != 0)
    return bad(std::to_string(oc_) +
               " output channels are not divisible by groups=" + std::to_string(groups_));
  int oh = (in.h + 2 * pad_ - k_) / stride_ + 1;
  int ow = (in.w + 2 * pad_ - k_) / stride_ + 1;
  if (in.h + 2 * pad_ < k_ || in.w + 2 * pad_ < k_ || oh <= 0 || ow <= 0)
    return bad("kernel " + std::to_string(k_) + " does not fit input " + in.str());
  in_ = in;
  out_ = Dims{oc_, oh, ow};
  cg_ = in.c / groups_;
  ocg_ = oc_ / groups_;
  kg_ = cg_ * k_ * k_;
  hwo_ = int64_t{oh} * ow;
  direct_ = in.c == 1 && groups_ == 1 && stride_ == 1 && k_ <= 15 &&
            direct_shape_.init(oc_, k_, pad_, in.h, in.w);
  return out_;
}

int64_t Conv2d::num_params() const { return int64_t{oc_} * kg_ + oc_; }

void Conv2d::init_params(Rng& rng) {
  float bound = 1.0f / std::sqrt(static_cast<float>(kg_));
  for (int64_t i = 0; i < num_params(); ++i) params_[i] = rng.uniform(-bound, bound);
}

void Conv2d::reserve(int max_batch) {
  if (direct_) {
    direct_scratch_.resize_uninitialized(static_cast<size_t>(direct_shape_.scratch_floats()));
    saved_cols_.resize(0);
    saved_in_ = nullptr;
    return;
  }
  const int64_t per_image = int64_t{groups_} * kg_ * hwo_;
  const int64_t images =
      std::min<int64_t>(max_batch, kSavedColsBudgetFloats / std::max<int64_t>(per_image, 1));
  // Sized for the largest batch (evaluation's 256 included) but never zeroed: forward writes
  // the columns before backward reads them, and untouched pages cost nothing. Zeroing them
  // cost 0.45 s per trainer here (~47 MB of page faults for LeNet), most of a recipe trial's
  // set-up.
  saved_cols_.resize_uninitialized(static_cast<size_t>(std::max<int64_t>(images, 0) * per_image));
  saved_in_ = nullptr;
}

int Conv2d::chunk(int batch) const {
  if (saves_cols(batch)) return std::max(batch, 1);
  int64_t per_image = int64_t{kg_} * hwo_;
  int64_t nb = std::max<int64_t>(1, kColsBudgetFloats / std::max<int64_t>(per_image, 1));
  return static_cast<int>(std::min<int64_t>(nb, std::max(batch, 1)));
}

int64_t Conv2d::workspace_floats(int batch) const {
  if (direct_) return 0;  // its scratch is its own (reserve())
  // cols (Kg, L) reused for dcols, plus tmp (OCg, L) for the output / gradient of one group.
  // The largest chunk any batch of up to `batch` images uses: a budget-sized chunk, or a whole
  // batch whose columns forward saves (reserve() must have run: it sizes the saved columns).
  const int64_t saved_images = static_cast<int64_t>(saved_cols_.size()) /
                               std::max<int64_t>(int64_t{groups_} * kg_ * hwo_, 1);
  const int64_t images = std::max<int64_t>(chunk(batch), std::min<int64_t>(saved_images, batch));
  return int64_t{kg_ + ocg_} * images * hwo_;
}

void Conv2d::im2col(const float* in, int n0, int nb, int g, float* cols) const {
  const int H = in_.h, W = in_.w, OH = out_.h, OW = out_.w;
  const int64_t L = nb * hwo_;
  for (int c = 0; c < cg_; ++c) {
    for (int ki = 0; ki < k_; ++ki) {
      for (int kj = 0; kj < k_; ++kj) {
        float* row = cols + ((int64_t{c} * k_ + ki) * k_ + kj) * L;
        // valid output columns: 0 <= ow*stride - pad + kj < W
        int ow_lo = std::min(OW, std::max(0, (pad_ - kj + stride_ - 1) / stride_));
        int ow_hi = std::min(OW, (W + pad_ - kj + stride_ - 1) / stride_);
        if (ow_hi < ow_lo) ow_hi = ow_lo;
        for (int b = 0; b < nb; ++b) {
          const float* img = in + ((int64_t{n0 + b} * in_.c) + g * cg_ + c) * H * W;
          float* dst = row + b * hwo_;
          for (int oh = 0; oh < OH; ++oh, dst += OW) {
            int ih = oh * stride_ - pad_ + ki;
            if (ih < 0 || ih >= H) {
              std::memset(dst, 0, sizeof(float) * OW);
              continue;
            }
            const float* src = img + int64_t{ih} * W - pad_ + kj;
            for (int ow = 0; ow < ow_lo; ++ow) dst[ow] = 0.0f;
            if (stride_ == 1) {
              std::memcpy(dst + ow_lo, src + ow_lo, sizeof(float) * (ow_hi - ow_lo));
            } else {
              for (int ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = src[ow * stride_];
            }
            for (int ow = ow_hi; ow < OW; ++ow) dst[ow] = 0.0f;
          }
        }
      }
    }
  }
}

void Conv2d::col2im(const float* cols, int n0, int nb, int g, float* din) const {
  const int H = in_.h, W = in_.w, OH = out_.h, OW = out_.w;
  const int64_t L = nb * hwo_;
  for (int c = 0; c < cg_; ++c) {
    for (int ki = 0; ki < k_; ++ki) {
      for (int kj = 0; kj < k_; ++kj) {
        const float* row = cols + ((int64_t{c} * k_ + ki) * k_ + kj) * L;
        int ow_lo = std::max(0, (pad_ - kj + stride_ - 1) / stride_);
        int ow_hi = std::min(OW, (W + pad_ - kj + stride_ - 1) / stride_);
        for (int b = 0; b < nb; ++b) {
          float* img = din + ((int64_t{n0 + b} * in_.c) + g * cg_ + c) * H * W;
          const float* src = row + b * hwo_;
          for (int oh = 0; oh < OH; ++oh, src += OW) {
            int ih = oh * stride_ - pad_ + ki;
            if (ih < 0 || ih >= H) continue;
            float* dst = img + int64_t{ih} * W - pad_ + kj;
            if (stride_ == 1) {  // contiguous: GCC vectorises this form, not the strided one
              for (int ow = ow_lo; ow < ow_hi; ++ow) dst[ow] += src[ow];
            } else {
              for (int ow = ow_lo; ow < ow_hi; ++ow) dst[ow * stride_] += src[ow];
            }
          }
        }
      }
    }
  }
}

void Conv2d::forward_direct(const float* in, float* out, int batch) {
  const float* bias = params_ + int64_t{oc_} * kg_;
  const int64_t in_plane = int64_t{in_.h} * in_.w;
  for (int n = 0; n < batch; ++n) {
    direct_conv_forward(direct_shape_, params_, bias, in + n * in_plane, out + n * oc_ * hwo_,
                        direct_scratch_.data());
  }
}

void Conv2d::backward_direct(const float* in, const float* dout, float* din, int batch) {
  std::memset(grads_, 0, sizeof(float) * oc_ * kg_);  // the weights' part; bias: backward()
  const int64_t in_plane = int64_t{in_.h} * in_.w;
  for (int n = 0; n < batch; ++n) {
    direct_conv_backward(direct_shape_, params_, in + n * in_plane, dout + n * oc_ * hwo_, grads_,
                         din != nullptr ? din + n * in_plane : nullptr, direct_scratch_.data());
  }
}

void Conv2d::forward(const LayerContext& ctx, const float* in, float* out, int batch) {
  // in (B, C, H, W) -> out (B, OC, OH, OW)
  if (direct_) return forward_direct(in, out, batch);
  const int nb_max = chunk(batch);
  const int64_t out_per_image = int64_t{oc_} * hwo_;
  const float* bias = params_ + int64_t{oc_} * kg_;
  const bool save = ctx.training && saves_cols(batch);
  saved_in_ = save ? in : nullptr;
  saved_batch_ = batch;
  for (int n0 = 0; n0 < batch; n0 += nb_max) {
    const int nb = std::min(nb_max, batch - n0);
    const int64_t L = nb * hwo_;
    float* tmp = ctx.workspace + kg_ * L;  // (OCg, L)
    for (int g = 0; g < groups_; ++g) {
      float* cols = save ? saved_cols_.data() + int64_t{g} * kg_ * L : ctx.workspace;  // (Kg, L)
      im2col(in, n0, nb, g, cols);
      const float* Wg = params_ + int64_t{g} * ocg_ * kg_;  // (OCg, Kg)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ocg_, L, kg_, 1.0f, Wg, kg_, cols, L,
                  0.0f, tmp, L);
      // scatter tmp (OCg, nb, OH*OW) -> out (nb, OC, OH*OW) adding the bias
      for (int b = 0; b < nb; ++b) {
        for (int o = 0; o < ocg_; ++o) {
          const int oc = g * ocg_ + o;
          const float* src = tmp + o * L + b * hwo_;
          float* dst = out + (n0 + b) * out_per_image + oc * hwo_;
          const float bv = bias[oc];
          for (int64_t p = 0; p < hwo_; ++p) dst[p] = src[p] + bv;
        }
      }
    }
  }
}

void Conv2d::backward(const LayerContext& ctx, const float* in, const float*, const float* dout,
                      float* din, int batch) {
  const int64_t out_per_image = int64_t{oc_} * hwo_;
  float* db = grads_ + int64_t{oc_} * kg_;
  if (direct_) {
    backward_direct(in, dout, din, batch);
  } else {
    backward_gemm(ctx, in, dout, din, batch);
  }
  // db (OC) = sum over images and pixels of dout
  for (int oc = 0; oc < oc_; ++oc) {
    double s = 0.0;
    for (int n = 0; n < batch; ++n) {
      const float* d = dout + n * out_per_image + oc * hwo_;
      float part = 0.0f;
      for (int64_t p = 0; p < hwo_; ++p) part += d[p];
      s += part;
    }
    db[oc] = static_cast<float>(s);
  }
}

void Conv2d::backward_gemm(const LayerContext& ctx, const float* in, const float* dout, float* din,
                           int batch) {
  const int nb_max = chunk(batch);
  const int64_t out_per_image = int64_t{oc_} * hwo_;
  if (din) std::memset(din, 0, sizeof(float) * batch * in_.size());
  // The columns forward kept for this very input (one chunk: the whole batch).
  const bool saved = saved_in_ == in && saved_batch_ == batch && saves_cols(batch);
  for (int n0 = 0; n0 < batch; n0 += nb_max) {
    const int nb = std::min(nb_max, batch - n0);
    const int64_t L = nb * hwo_;
    float* dcols = ctx.workspace;  // (Kg, L)
    float* tmp = dcols + kg_ * L;  // (OCg, L)
    for (int g = 0; g < groups_; ++g) {
      // gather dout (nb, OC, OH*OW) -> tmp (OCg, L)
      for (int b = 0; b < nb; ++b)
        for (int o = 0; o < ocg_; ++o)
          std::memcpy(tmp + o * L + b * hwo_,
                      dout + (n0 + b) * out_per_image + (g * ocg_ + o) * hwo_,
                      sizeof(float) * hwo_);
      const float* cols = saved ? saved_cols_.data() + int64_t{g} * kg_ * L : dcols;
      if (!saved) im2col(in, n0, nb, g, dcols);
      float* dWg = grads_ + int64_t{g} * ocg_ * kg_;
      // dWg (OCg, Kg) (+)= tmp (OCg, L) x cols^T (L, Kg)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ocg_, kg_, L, 1.0f, tmp, L, cols, L,
                  n0 == 0 ? 0.0f : 1.0f, dWg, kg_);
      if (din) {
        // dcols (Kg, L) = Wg^T (Kg, OCg) x tmp (OCg, L), reusing the cols buffer
        const float* Wg = params_ + int64_t{g} * ocg_ * kg_;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kg_, L, ocg_, 1.0f, Wg, kg_, tmp, L,
                    0.0f, dcols, L);
        col2im(dcols, n0, nb, g, din);
      }
    }
  }
}

}  // namespace dltune::engine
