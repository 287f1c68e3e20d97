// Conv2d's direct, direct3x3, winograd and pointwise kernels (engine/ops/conv2d.h) on the rank's
// threads: forward and the input gradient one task per image (or chunk of images), the weight
// gradient through dw_partials() partials of consecutive images summed in order (the same bits on
// any number of threads).
#include <algorithm>
#include <cstring>

#include "engine/core/gemm.h"
#include "engine/core/parallel.h"
#include "engine/ops/conv2d.h"

namespace dltune::engine {

// ---- direct (one input channel) ------------------------------------------------------------

void Conv2d::forward_direct(const OpContext& ctx, const float* in, float* out, int batch) {
  const int64_t in_plane = int64_t{h_} * w_, scratch = direct_shape_.scratch_floats();
  ctx.pool->run(batch, [&](int64_t n, int thread) {
    direct_conv_forward(direct_shape_, wts_, b_, in + n * in_plane, out + n * oc_ * hwo_,
                        direct_scratch_.data() + thread * scratch);
  });
}

void Conv2d::backward_direct(const OpContext& ctx, const float* in, const float* dout, float* din,
                             bool din_acc, int batch) {
  // The kernel writes each image's input gradient: it adds through the thread's scratch tail
  // when it must add.
  const int64_t in_plane = int64_t{h_} * w_, scratch = direct_shape_.scratch_floats();
  const int P = dw_partials(batch);
  float* partials = ctx.workspace;  // (P, OC, K, K)
  ctx.pool->run(P, [&](int64_t p, int thread) {
    int64_t n0 = 0, n1 = 0;
    part_range(batch, P, p, &n0, &n1);
    float* dw = partials + p * weight_floats();
    std::memset(dw, 0, sizeof(float) * weight_floats());
    float* s = direct_scratch_.data() + thread * scratch;
    for (int64_t n = n0; n < n1; ++n) {
      float* dx = din == nullptr ? nullptr : din + n * in_plane;
      direct_conv_backward(direct_shape_, wts_, in + n * in_plane, dout + n * oc_ * hwo_, dw,
                           din_acc ? s + direct_shape_.image_grad_offset() : dx, s);
      if (dx != nullptr && din_acc)
        store_grad(dx, s + direct_shape_.image_grad_offset(), in_plane, true);
    }
  });
  reduce_partials(ctx, partials, P, dw_acc_);
}

// ---- direct3x3 -----------------------------------------------------------------------------

void Conv2d::forward_3x3(const OpContext& ctx, const float* in, float* out, int batch) {
  float* packed = c3_packed_.data();
  conv3x3_pack(c3_, wts_, packed);
  const int64_t in_image = int64_t{c_} * h_ * w_, out_image = int64_t{oc_} * hwo_;
  const int64_t per_thread = c3_in_.size() / static_cast<size_t>(threads_);
  ctx.pool->run(batch, [&](int64_t n, int thread) {
    float* padded = c3_in_.data() + thread * per_thread;
    conv3x3_pad_input(c3_, in + n * in_image, c_, padded);
    conv3x3_forward(c3_, packed, b_, padded, out + n * out_image);
  });
}

void Conv2d::backward_3x3(const OpContext& ctx, const float* in, const float* dout, float* din,
                          bool din_acc, int batch) {
  // The weights are packed again: backward must not rely on which forward ran last.
  float* packed = c3_packed_.data();
  conv3x3_pack(c3_, wts_, packed);
  const int group = conv3x3_group(c3_, batch), P = dw_partials(batch);
  const int64_t in_image = int64_t{c_} * h_ * w_, out_image = int64_t{oc_} * hwo_;
  const int64_t in_stride = c3_in_.size() / static_cast<size_t>(threads_);
  const int64_t dout_stride = c3_dout_.size() / static_cast<size_t>(threads_);
  const int64_t scratch_stride = c3_.grad_scratch_floats();
  float* partials = ctx.workspace;  // (P, OC, C, 3, 3): one per group of images
  ctx.pool->run(P, [&](int64_t p, int thread) {
    const int n0 = static_cast<int>(p) * group;
    const int nb = std::min(group, batch - n0);
    float* pin = c3_in_.data() + thread * in_stride;
    float* pdout = c3_dout_.data() + thread * dout_stride;
    conv3x3_pad_input(c3_, in + n0 * in_image, nb * c_, pin);
    conv3x3_pad_grad(c3_, dout + n0 * out_image, nb * oc_, pdout);
    if (din != nullptr) {
      for (int i = 0; i < nb; ++i) {
        conv3x3_input_grad(c3_, packed, pdout + i * c3_.padded_dout_floats(),
                           c3_scratch_.data() + thread * scratch_stride, din + (n0 + i) * in_image,
                           din_acc);
      }
    }
    float* dw = partials + p * weight_floats();
    std::memset(dw, 0, sizeof(float) * weight_floats());
    conv3x3_weight_grad(c3_, pin, pdout, nb, dw);
  });
  reduce_partials(ctx, partials, P, dw_acc_);
}

// ---- winograd -------------------------------------------------------------------------------

namespace {

// packed <- the transformed weights of both directions, a block of output channels a task.
void pack_winograd(ThreadPool& pool, const WinogradShape& s, const float* w, float* packed) {
  pool.run(s.pack_parts(),
           [&](int64_t part, int) { winograd_pack_part(s, w, static_cast<int>(part), packed); });
}

}  // namespace

void Conv2d::forward_winograd(const OpContext& ctx, const float* in, float* out, int batch) {
  float* packed = wino_packed_.data();
  pack_winograd(*ctx.pool, wino_, wts_, packed);
  // One task per block of the kernel's (one image at 32x32 and 16x16): work for every thread.
  const int per = wino_.images;
  const int64_t in_image = int64_t{c_} * h_ * w_, out_image = int64_t{oc_} * hwo_;
  float* scratch = ctx.workspace + shared_floats(batch);
  ctx.pool->run((batch + per - 1) / per, [&](int64_t task, int thread) {
    const int n0 = static_cast<int>(task) * per, nb = std::min(per, batch - n0);
    winograd_forward(wino_, packed, b_, in + n0 * in_image, nb, out + n0 * out_image, false,
                     scratch + thread * wino_.scratch_floats());
  });
}

void Conv2d::backward_winograd(const OpContext& ctx, const float* in, const float* dout, float* din,
                               bool din_acc, int batch) {
  // As direct3x3: the weights packed again, each partial's images' input gradient and weight
  // gradient, the partials summed in order.
  float* packed = wino_packed_.data();
  pack_winograd(*ctx.pool, wino_, wts_, packed);
  const int P = dw_partials(batch);
  const int64_t in_image = int64_t{c_} * h_ * w_, out_image = int64_t{oc_} * hwo_;
  float* partials = ctx.workspace;  // (P, OC, C, 3, 3)
  float* scratch = ctx.workspace + shared_floats(batch);
  ctx.pool->run(P, [&](int64_t p, int thread) {
    int64_t n0 = 0, n1 = 0;
    part_range(batch, P, p, &n0, &n1);
    const int nb = static_cast<int>(n1 - n0);
    float* s = scratch + thread * wino_.scratch_floats();
    if (din != nullptr)
      winograd_input_grad(wino_, packed, dout + n0 * out_image, nb, din + n0 * in_image, din_acc,
                          s);
    winograd_weight_grad(wino_, in + n0 * in_image, dout + n0 * out_image, nb,
                         partials + p * weight_floats(), false, s);
  });
  reduce_partials(ctx, partials, P, dw_acc_);
}

// ---- pointwise (1x1, stride 1) -------------------------------------------------------------

void Conv2d::forward_pointwise(const OpContext& ctx, const float* in, float* out, int batch) {
  // Per image: out (OC, HW) = W (OC, C) x in (C, HW) + b
  const int64_t hw = hwo_;
  ctx.pool->run(batch, [&](int64_t n, int) {
    float* o = out + n * oc_ * hw;
    if (b_)
      for (int oc = 0; oc < oc_; ++oc) std::fill(o + oc * hw, o + (oc + 1) * hw, b_[oc]);
    serial_sgemm(false, false, oc_, hw, c_, 1.0f, wts_, c_, in + n * c_ * hw, hw, b_ ? 1.0f : 0.0f,
                 o, hw);
  });
}

void Conv2d::backward_pointwise(const OpContext& ctx, const float* in, const float* dout,
                                float* din, bool din_acc, int batch) {
  const int64_t hw = hwo_;
  const int P = dw_partials(batch);
  float* partials = ctx.workspace;  // (P, OC, C)
  ctx.pool->run(P, [&](int64_t p, int) {
    int64_t n0 = 0, n1 = 0;
    part_range(batch, P, p, &n0, &n1);
    float* dw = partials + p * weight_floats();
    for (int64_t n = n0; n < n1; ++n) {
      const float* d = dout + n * oc_ * hw;
      // dW (OC, C) (+)= dout (OC, HW) x in^T (HW, C)
      serial_sgemm(false, true, oc_, c_, hw, 1.0f, d, hw, in + n * c_ * hw, hw,
                   n > n0 ? 1.0f : 0.0f, dw, c_);
      // din (C, HW) (+)= W^T (C, OC) x dout (OC, HW)
      if (din)
        serial_sgemm(true, false, c_, hw, oc_, 1.0f, wts_, c_, d, hw, din_acc ? 1.0f : 0.0f,
                     din + n * c_ * hw, hw);
    }
  });
  reduce_partials(ctx, partials, P, dw_acc_);
}

}  // namespace dltune::engine
