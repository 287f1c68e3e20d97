#include "engine/ops/conv2d.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include <cblas.h>

namespace dltune::engine {

Status Conv2d::configure() {
  const recipes::OpAttrs& a = attrs();
  oc_ = static_cast<int>(a.out);
  k_ = static_cast<int>(a.kernel);
  stride_ = static_cast<int>(a.stride);
  pad_ = static_cast<int>(a.pad);
  groups_ = static_cast<int>(a.groups);
  c_ = static_cast<int>(in_[0][0]);
  h_ = static_cast<int>(in_[0][1]);
  w_ = static_cast<int>(in_[0][2]);
  oh_ = static_cast<int>(out_[1]);
  ow_ = static_cast<int>(out_[2]);
  cg_ = c_ / groups_;
  ocg_ = oc_ / groups_;
  kg_ = cg_ * k_ * k_;
  hwo_ = int64_t{oh_} * ow_;
  const Conv2dKernel kernel = choose_conv2d(a, in_[0], out_);  // as the memory model sees it
  direct_ = kernel.kind == Conv2dKernel::Kind::kDirect;
  conv3x3_ = kernel.kind == Conv2dKernel::Kind::kConv3x3;
  pointwise_ = kernel.kind == Conv2dKernel::Kind::kPointwise;
  direct_shape_ = kernel.direct;
  c3_ = kernel.c3;
  return ok_status();
}

void Conv2d::reserve(int max_batch) {
  if (conv3x3_) {
    const int group = conv3x3_group(c3_, max_batch);
    c3_packed_.resize_uninitialized(static_cast<size_t>(c3_.packed_floats()));
    c3_in_.resize_uninitialized(static_cast<size_t>(group * c3_.padded_in_floats()));
    c3_dout_.resize_uninitialized(static_cast<size_t>(group * c3_.padded_dout_floats()));
    c3_scratch_.resize_uninitialized(static_cast<size_t>(c3_.grad_scratch_floats()));
    saved_cols_.resize(0);
    saved_in_ = nullptr;
    return;
  }
  if (direct_ || pointwise_) {  // neither builds columns
    if (direct_)
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

void Conv2d::im2col(const float* in, int n0, int nb, int g, float* cols) const {
  const int H = h_, W = w_, OH = oh_, OW = ow_;
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
          const float* img = in + ((int64_t{n0 + b} * c_) + g * cg_ + c) * H * W;
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
  const int H = h_, W = w_, OH = oh_, OW = ow_;
  const int64_t L = nb * hwo_;
  for (int c = 0; c < cg_; ++c) {
    for (int ki = 0; ki < k_; ++ki) {
      for (int kj = 0; kj < k_; ++kj) {
        const float* row = cols + ((int64_t{c} * k_ + ki) * k_ + kj) * L;
        int ow_lo = std::max(0, (pad_ - kj + stride_ - 1) / stride_);
        int ow_hi = std::min(OW, (W + pad_ - kj + stride_ - 1) / stride_);
        for (int b = 0; b < nb; ++b) {
          float* img = din + ((int64_t{n0 + b} * c_) + g * cg_ + c) * H * W;
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
  const int64_t in_plane = int64_t{h_} * w_;
  for (int n = 0; n < batch; ++n) {
    direct_conv_forward(direct_shape_, params_[0], bias(), in + n * in_plane, out + n * oc_ * hwo_,
                        direct_scratch_.data());
  }
}

void Conv2d::backward_direct(const OpContext& ctx, const float* in, const float* dout, float* din,
                             int batch) {
  if (!accumulate_grad(ctx, 0))  // the weights' part; the bias: backward()
    std::memset(grads_[0], 0, sizeof(float) * oc_ * kg_);
  const int64_t in_plane = int64_t{h_} * w_;
  for (int n = 0; n < batch; ++n) {
    direct_conv_backward(direct_shape_, params_[0], in + n * in_plane, dout + n * oc_ * hwo_,
                         grads_[0], din != nullptr ? din + n * in_plane : nullptr,
                         direct_scratch_.data());
  }
}

void Conv2d::forward_3x3(const float* in, float* out, int batch) {
  float* packed = c3_packed_.data();
  conv3x3_pack(c3_, params_[0], packed);
  const int64_t in_image = int64_t{c_} * h_ * w_, out_image = int64_t{oc_} * hwo_;
  for (int n = 0; n < batch; ++n) {
    conv3x3_pad_input(c3_, in + n * in_image, c_, c3_in_.data());
    conv3x3_forward(c3_, packed, bias(), c3_in_.data(), out + n * out_image);
  }
}

void Conv2d::backward_3x3(const OpContext& ctx, const float* in, const float* dout, float* din,
                          bool din_acc, int batch) {
  // The weights are packed again: backward must not rely on which forward ran last.
  float* packed = c3_packed_.data();
  conv3x3_pack(c3_, params_[0], packed);
  if (!accumulate_grad(ctx, 0)) std::memset(grads_[0], 0, sizeof(float) * oc_ * c_ * 9);
  const int group = conv3x3_group(c3_, batch);
  const int64_t in_image = int64_t{c_} * h_ * w_, out_image = int64_t{oc_} * hwo_;
  for (int n0 = 0; n0 < batch; n0 += group) {
    const int nb = std::min(group, batch - n0);
    conv3x3_pad_input(c3_, in + n0 * in_image, nb * c_, c3_in_.data());
    conv3x3_pad_grad(c3_, dout + n0 * out_image, nb * oc_, c3_dout_.data());
    if (din != nullptr) {
      for (int i = 0; i < nb; ++i) {
        conv3x3_input_grad(c3_, packed, c3_dout_.data() + i * c3_.padded_dout_floats(),
                           c3_scratch_.data(), din + (n0 + i) * in_image, din_acc);
      }
    }
    conv3x3_weight_grad(c3_, c3_in_.data(), c3_dout_.data(), nb, grads_[0]);
  }
}

void Conv2d::forward_pointwise(const float* in, float* out, int batch) {
  // Per image: out (OC, HW) = W (OC, C) x in (C, HW) + b
  const float* b = bias();
  const int64_t hw = hwo_;
  for (int n = 0; n < batch; ++n) {
    float* o = out + n * oc_ * hw;
    if (b)
      for (int oc = 0; oc < oc_; ++oc) std::fill(o + oc * hw, o + (oc + 1) * hw, b[oc]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, oc_, static_cast<int>(hw), c_, 1.0f,
                params_[0], c_, in + int64_t{n} * c_ * hw, static_cast<int>(hw), b ? 1.0f : 0.0f, o,
                static_cast<int>(hw));
  }
}

void Conv2d::backward_pointwise(const OpContext& ctx, const float* in, const float* dout,
                                float* din, bool din_acc, int batch) {
  const int hw = static_cast<int>(hwo_);
  for (int n = 0; n < batch; ++n) {
    const float* d = dout + int64_t{n} * oc_ * hw;
    // dW (OC, C) (+)= dout (OC, HW) x in^T (HW, C)
    const bool acc = n > 0 || accumulate_grad(ctx, 0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, oc_, c_, hw, 1.0f, d, hw,
                in + int64_t{n} * c_ * hw, hw, acc ? 1.0f : 0.0f, grads_[0], c_);
    // din (C, HW) (+)= W^T (C, OC) x dout (OC, HW)
    if (din)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c_, hw, oc_, 1.0f, params_[0], c_, d, hw,
                  din_acc ? 1.0f : 0.0f, din + int64_t{n} * c_ * hw, hw);
  }
}

void Conv2d::forward(const OpContext& ctx, const float* const* inputs, float* out, int batch) {
  // in (B, C, H, W) -> out (B, OC, OH, OW)
  const float* in = inputs[0];
  if (direct_) return forward_direct(in, out, batch);
  if (conv3x3_) return forward_3x3(in, out, batch);
  if (pointwise_) return forward_pointwise(in, out, batch);
  const int nb_max = chunk(batch);
  const int64_t out_per_image = int64_t{oc_} * hwo_;
  const float* b = bias();
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
      const float* Wg = params_[0] + int64_t{g} * ocg_ * kg_;  // (OCg, Kg)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ocg_, L, kg_, 1.0f, Wg, kg_, cols, L,
                  0.0f, tmp, L);
      // scatter tmp (OCg, nb, OH*OW) -> out (nb, OC, OH*OW) adding the bias
      for (int bi = 0; bi < nb; ++bi) {
        for (int o = 0; o < ocg_; ++o) {
          const int oc = g * ocg_ + o;
          const float* src = tmp + o * L + bi * hwo_;
          float* dst = out + (n0 + bi) * out_per_image + oc * hwo_;
          const float bv = b ? b[oc] : 0.0f;
          for (int64_t p = 0; p < hwo_; ++p) dst[p] = src[p] + bv;
        }
      }
    }
  }
}

void Conv2d::backward(const OpContext& ctx, const float* const* inputs, const float*,
                      const float* dout, const GradOut* din, int batch) {
  const float* in = inputs[0];
  float* dx = din[0].data;
  const int64_t out_per_image = int64_t{oc_} * hwo_;
  if (direct_) {
    // The direct kernel writes the input gradient: add it through a scratch when it must add.
    const bool acc = dx != nullptr && din[0].accumulate;
    if (acc) din_tmp_.reserve(static_cast<size_t>(batch * in_numel()));
    backward_direct(ctx, in, dout, acc ? din_tmp_.data() : dx, batch);
    if (acc) store_grad(dx, din_tmp_.data(), batch * in_numel(), true);
  } else if (conv3x3_) {
    backward_3x3(ctx, in, dout, dx, din[0].accumulate, batch);
  } else if (pointwise_) {
    backward_pointwise(ctx, in, dout, dx, din[0].accumulate, batch);
  } else {
    backward_gemm(ctx, in, dout, dx, din[0].accumulate, batch);
  }
  if (!attrs().bias) return;
  // db (OC) (+)= sum over images and pixels of dout
  float* db = grads_[1];
  const bool acc = accumulate_grad(ctx, 1);
  for (int oc = 0; oc < oc_; ++oc) {
    double s = 0.0;
    for (int n = 0; n < batch; ++n) {
      const float* d = dout + n * out_per_image + oc * hwo_;
      float part = 0.0f;
      for (int64_t p = 0; p < hwo_; ++p) part += d[p];
      s += part;
    }
    db[oc] = static_cast<float>(s) + (acc ? db[oc] : 0.0f);
  }
}

void Conv2d::backward_gemm(const OpContext& ctx, const float* in, const float* dout, float* din,
                           bool din_acc, int batch) {
  const int nb_max = chunk(batch);
  const int64_t out_per_image = int64_t{oc_} * hwo_;
  if (din && !din_acc) std::memset(din, 0, sizeof(float) * batch * in_numel());
  // The columns forward kept for this very input (one chunk: the whole batch).
  const bool saved = saved_in_ == in && saved_batch_ == batch && saves_cols(batch);
  const bool acc = accumulate_grad(ctx, 0);
  for (int n0 = 0; n0 < batch; n0 += nb_max) {
    const int nb = std::min(nb_max, batch - n0);
    const int64_t L = nb * hwo_;
    float* dcols = ctx.workspace;  // (Kg, L)
    float* tmp = dcols + kg_ * L;  // (OCg, L)
    for (int g = 0; g < groups_; ++g) {
      // gather dout (nb, OC, OH*OW) -> tmp (OCg, L)
      for (int bi = 0; bi < nb; ++bi)
        for (int o = 0; o < ocg_; ++o)
          std::memcpy(tmp + o * L + bi * hwo_,
                      dout + (n0 + bi) * out_per_image + (g * ocg_ + o) * hwo_,
                      sizeof(float) * hwo_);
      const float* cols = saved ? saved_cols_.data() + int64_t{g} * kg_ * L : dcols;
      if (!saved) im2col(in, n0, nb, g, dcols);
      float* dWg = grads_[0] + int64_t{g} * ocg_ * kg_;
      // dWg (OCg, Kg) (+)= tmp (OCg, L) x cols^T (L, Kg)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ocg_, kg_, L, 1.0f, tmp, L, cols, L,
                  n0 == 0 && !acc ? 0.0f : 1.0f, dWg, kg_);
      if (din) {
        // dcols (Kg, L) = Wg^T (Kg, OCg) x tmp (OCg, L), reusing the cols buffer
        const float* Wg = params_[0] + int64_t{g} * ocg_ * kg_;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kg_, L, ocg_, 1.0f, Wg, kg_, tmp, L,
                    0.0f, dcols, L);
        col2im(dcols, n0, nb, g, din);
      }
    }
  }
}

}  // namespace dltune::engine
