#include "engine/ops/conv2d.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/core/parallel.h"
#include "engine/ops/onednn.h"

// The op's set-up, kernel choice, scratch accounting and the bf16 wrapper; the kernels
// themselves are in conv2d_im2col.cc and conv2d_paths.cc.

namespace dltune::engine {
Conv2d::Conv2d() = default;
Conv2d::~Conv2d() = default;

Status Conv2d::configure() {
  init(attrs(), in_[0], out_);
  return ok_status();
}

std::vector<std::string> Conv2d::kernels() const {
  std::vector<std::string> k = own_kernels();
  if (onednn_conv_supported(onednn_shape(), precision_)) k.push_back("onednn");
  return k;
}

OnednnConvShape Conv2d::onednn_shape() const {
  return OnednnConvShape{c_, h_, w_, oc_, oh_, ow_, k_, stride_, pad_, groups_, attrs().bias};
}

void Conv2d::use_kernel(const std::string& name) {
  release();
  kind_ = conv2d_kind(name);
  onednn_.reset();
  if (kind_ == Kind::kOnednn) onednn_ = make_onednn_conv(onednn_shape(), precision_);
}

OpMemory Conv2d::library_memory(int batch) const {
  if (!onednn_) return {};
  return {onednn_->saved_floats(batch, threads_), onednn_->workspace_floats(batch, threads_)};
}

void Conv2d::release() {
  direct_scratch_.resize(0);
  c3_packed_.resize(0);
  c3_in_.resize(0);
  c3_dout_.resize(0);
  c3_scratch_.resize(0);
  wino_packed_.resize(0);
  saved_cols_.resize(0);
  bf16_w_.resize(0);
  saved_in_ = nullptr;
  if (onednn_) onednn_->release();
}

// ---- scratch -------------------------------------------------------------------------------

void Conv2d::reserve(int max_batch) {
  const auto T = static_cast<size_t>(threads_);
  bf16_w_.resize_uninitialized(
      precision_ == Precision::kBf16 ? static_cast<size_t>(weight_floats() + oc_) : 0);
  switch (kind_) {
    case Kind::kDirect3x3: {
      const int group = conv3x3_group(c3_, max_batch);
      c3_packed_.resize_uninitialized(static_cast<size_t>(c3_.packed_floats()));
      c3_in_.resize_uninitialized(T * static_cast<size_t>(group * c3_.padded_in_floats()));
      c3_dout_.resize_uninitialized(T * static_cast<size_t>(group * c3_.padded_dout_floats()));
      c3_scratch_.resize_uninitialized(T * static_cast<size_t>(c3_.grad_scratch_floats()));
      break;
    }
    case Kind::kWinograd:
      wino_packed_.resize_uninitialized(static_cast<size_t>(wino_.packed_floats()));
      break;
    case Kind::kDirect:
      direct_scratch_.resize_uninitialized(T * static_cast<size_t>(direct_shape_.scratch_floats()));
      break;
    case Kind::kIm2col:
      // Sized for the largest batch but never zeroed: forward writes the columns before backward
      // reads them, and untouched pages cost nothing (zeroing them cost 0.45 s per trainer).
      saved_cols_.resize_uninitialized(static_cast<size_t>(saved_cols_capacity(kind_, max_batch)));
      break;
    case Kind::kOnednn:
      onednn_->reserve(max_batch, threads_);
      break;
    case Kind::kPointwise:
      break;
  }
  saved_in_ = nullptr;
}

// ---- dispatch ------------------------------------------------------------------------------

void Conv2d::forward(const OpContext& ctx, const float* const* inputs, float* out, int batch) {
  // in (B, C, H, W) -> out (B, OC, OH, OW)
  if (precision_ == Precision::kBf16) return forward_bf16(ctx, inputs[0], out, batch);
  wts_ = params_[0];
  b_ = attrs().bias ? params_[1] : nullptr;
  forward_fp32(ctx, inputs[0], out, batch);
}

void Conv2d::forward_fp32(const OpContext& ctx, const float* in, float* out, int batch) {
  switch (kind_) {
    case Kind::kDirect:
      return forward_direct(ctx, in, out, batch);
    case Kind::kDirect3x3:
      return forward_3x3(ctx, in, out, batch);
    case Kind::kWinograd:
      return forward_winograd(ctx, in, out, batch);
    case Kind::kPointwise:
      return forward_pointwise(ctx, in, out, batch);
    case Kind::kOnednn:
      return onednn_->forward(*ctx.pool, in, wts_, b_, out, batch, ctx.workspace);
    case Kind::kIm2col:
      return forward_im2col(ctx, in, out, batch);
  }
}

void Conv2d::backward(const OpContext& ctx, const float* const* inputs, const float*,
                      const float* dout, const GradOut* din, int batch) {
  if (precision_ == Precision::kBf16) return backward_bf16(ctx, inputs[0], dout, din[0], batch);
  wts_ = params_[0];
  b_ = attrs().bias ? params_[1] : nullptr;
  dw_ = grads_[0];
  dw_acc_ = accumulate_grad(ctx, 0);
  db_ = attrs().bias ? grads_[1] : nullptr;
  db_acc_ = attrs().bias && accumulate_grad(ctx, 1);
  backward_fp32(ctx, inputs[0], dout, din[0].data, din[0].accumulate, batch);
}

void Conv2d::backward_fp32(const OpContext& ctx, const float* in, const float* dout, float* dx,
                           bool din_acc, int batch) {
  switch (kind_) {
    case Kind::kDirect:
      backward_direct(ctx, in, dout, dx, din_acc, batch);
      break;
    case Kind::kDirect3x3:
      backward_3x3(ctx, in, dout, dx, din_acc, batch);
      break;
    case Kind::kWinograd:
      backward_winograd(ctx, in, dout, dx, din_acc, batch);
      break;
    case Kind::kPointwise:
      backward_pointwise(ctx, in, dout, dx, din_acc, batch);
      break;
    case Kind::kOnednn:
      onednn_->backward(*ctx.pool, in, wts_, dout, dx, din_acc, dw_, dw_acc_, batch, ctx.workspace);
      break;
    case Kind::kIm2col:
      backward_im2col(ctx, in, dout, dx, din_acc, batch);
      break;
  }
  if (db_ != nullptr) backward_bias(ctx, dout, batch);
}

void Conv2d::backward_bias(const OpContext& ctx, const float* dout, int batch) {
  // db (OC) (+)= sum over images and pixels of dout: each channel one task's, in order
  const int64_t out_per_image = int64_t{oc_} * hwo_;
  ctx.pool->run(oc_, [&](int64_t oc, int) {
    double s = 0.0;
    for (int n = 0; n < batch; ++n) {
      const float* d = dout + n * out_per_image + oc * hwo_;
      float part = 0.0f;
      for (int64_t p = 0; p < hwo_; ++p) part += d[p];
      s += part;
    }
    db_[oc] = static_cast<float>(s) + (db_acc_ ? db_[oc] : 0.0f);
  });
}

void Conv2d::reduce_partials(const OpContext& ctx, const float* partials, int count,
                             bool accumulate) {
  sum_partials(*ctx.pool, partials, weight_floats(), count, weight_floats(), dw_, accumulate);
}

// ---- bf16 ----------------------------------------------------------------------------------

void Conv2d::forward_bf16(const OpContext& ctx, const float* in, float* out, int batch) {
  // autocast: conv(x.bf16(), W.bf16(), b.bf16()) accumulated in fp32, returned as bf16
  float* xb = ctx.workspace + kernel_workspace_floats(batch);
  const int64_t nx = batch * in_numel();
  parallel_elements(*ctx.pool, nx,
                    [&](int64_t b, int64_t e, int) { bf16_round_array(in + b, xb + b, e - b); });
  bf16_round_array(params_[0], bf16_w_.data(), weight_floats());
  if (attrs().bias) bf16_round_array(params_[1], bf16_w_.data() + weight_floats(), oc_);
  wts_ = bf16_w_.data();
  b_ = attrs().bias ? bf16_w_.data() + weight_floats() : nullptr;
  forward_fp32(ctx, xb, out, batch);
  saved_in_ = saved_in_ == xb ? in : saved_in_;  // the columns kept are of this input
  parallel_elements(*ctx.pool, batch * out_numel(),
                    [&](int64_t b, int64_t e, int) { bf16_round_array(out + b, out + b, e - b); });
}

void Conv2d::backward_bf16(const OpContext& ctx, const float* in, const float* dout,
                           const GradOut& din, int batch) {
  // The bf16 backward kernels on bf16 operands, fp32 accumulation, bf16 results; those are
  // written or added (in fp32) to the fp32 gradients, as autograd adds the casts' gradients.
  float* xb = ctx.workspace + kernel_workspace_floats(batch);
  float* db16 = xb + batch * in_numel();     // (B, OC, OH, OW) rounded dout
  float* dx32 = db16 + batch * out_numel();  // (B, C, H, W) input gradient
  float* dw32 = dx32 + batch * in_numel();   // (OC, Kg) then (OC)
  const int64_t nx = batch * in_numel(), ny = batch * out_numel();
  ThreadPool& pool = *ctx.pool;
  parallel_elements(pool, nx,
                    [&](int64_t b, int64_t e, int) { bf16_round_array(in + b, xb + b, e - b); });
  parallel_elements(
      pool, ny, [&](int64_t b, int64_t e, int) { bf16_round_array(dout + b, db16 + b, e - b); });
  bf16_round_array(params_[0], bf16_w_.data(), weight_floats());
  wts_ = bf16_w_.data();
  b_ = nullptr;
  dw_ = dw32;
  dw_acc_ = false;
  db_ = attrs().bias ? dw32 + weight_floats() : nullptr;
  db_acc_ = false;
  if (saved_in_ == in) saved_in_ = xb;  // forward's columns are of the rounded input
  backward_fp32(ctx, xb, db16, din.data ? dx32 : nullptr, false, batch);
  saved_in_ = saved_in_ == xb ? in : saved_in_;
  auto round_store = [&](const float* src, float* dst, int64_t n, bool acc) {
    parallel_elements(pool, n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) {
        const float v = bf16_round(src[i]);
        dst[i] = acc ? dst[i] + v : v;
      }
    });
  };
  if (din.data) round_store(dx32, din.data, nx, din.accumulate);
  round_store(dw32, grads_[0], weight_floats(), accumulate_grad(ctx, 0));
  if (attrs().bias) round_store(dw32 + weight_floats(), grads_[1], oc_, accumulate_grad(ctx, 1));
}

}  // namespace dltune::engine
