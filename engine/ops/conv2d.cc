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
namespace {

// Whether 3x3 "same" convolutions default to engine/ops/conv3x3.h's kernels where those win,
// unless DLTUNE_CONV3X3=0 asks for im2col + GEMM (to compare the two).
bool conv3x3_default() {
  static const bool use = [] {
    const char* env = std::getenv("DLTUNE_CONV3X3");  // NOLINT: read once
    return !(env != nullptr && std::string(env) == "0");
  }();
  return use;
}

// Where the direct kernels beat im2col + GEMM (measured per layer on an Emerald Rapids core,
// one thread, AVX-512): up to 64 channels in and out (ResNet-18's 64-channel layers at 56x56:
// forward 108 against 167 ms, backward 229 against 312 per 32 images; its 128-channel layers
// already 15 % slower in backward, the 512-channel ones 1.3-1.9x) and an image's padded planes
// within 2 MiB (the weight gradient streams them once per 8 output channels and input row).
bool conv3x3_wins(const Conv3x3Shape& s) {
  return s.c <= 64 && s.oc <= 64 &&
         (s.padded_in_floats() + s.padded_dout_floats()) * 4 <= (int64_t{2} << 20);
}

}  // namespace

Conv2d::Conv2d() = default;
Conv2d::~Conv2d() = default;

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
  can_direct_ = c_ == 1 && groups_ == 1 && stride_ == 1 && k_ <= 15 &&
                direct_shape_.init(oc_, k_, pad_, h_, w_);
  can_3x3_ = k_ == 3 && (stride_ == 1 || stride_ == 2) && pad_ == 1 && groups_ == 1 && c_ > 1 &&
             conv3x3_fast() && c3_.init(c_, oc_, h_, w_, stride_);
  can_pointwise_ = k_ == 1 && stride_ == 1 && pad_ == 0 && groups_ == 1;
  return ok_status();
}

std::vector<std::string> Conv2d::kernels() const {
  std::vector<std::string> k;
  if (can_direct_) k.push_back("direct");
  const bool wins3x3 = can_3x3_ && conv3x3_default() && conv3x3_wins(c3_);
  if (wins3x3) k.push_back("direct3x3");
  if (can_pointwise_) k.push_back("pointwise");
  k.push_back("im2col");
  if (can_3x3_ && !wins3x3) k.push_back("direct3x3");
  if (onednn_conv_supported(onednn_shape(), precision_)) k.push_back("onednn");
  return k;
}

OnednnConvShape Conv2d::onednn_shape() const {
  return OnednnConvShape{c_, h_, w_, oc_, oh_, ow_, k_, stride_, pad_, groups_, attrs().bias};
}

void Conv2d::use_kernel(const std::string& name) {
  release();
  kind_ = name == "direct"      ? Kind::kDirect
          : name == "direct3x3" ? Kind::kDirect3x3
          : name == "pointwise" ? Kind::kPointwise
          : name == "onednn"    ? Kind::kOnednn
                                : Kind::kIm2col;
  onednn_.reset();
  if (kind_ == Kind::kOnednn) onednn_ = make_onednn_conv(onednn_shape(), precision_);
}

void Conv2d::release() {
  direct_scratch_.resize(0);
  c3_packed_.resize(0);
  c3_in_.resize(0);
  c3_dout_.resize(0);
  c3_scratch_.resize(0);
  saved_cols_.resize(0);
  bf16_w_.resize(0);
  saved_in_ = nullptr;
  if (onednn_) onednn_->release();
}

// ---- chunking ------------------------------------------------------------------------------

int Conv2d::images_per_task(int batch) const {
  // At least 8 chunks where the batch allows (work for up to 8 threads, 4 images each at batch
  // 32), and a chunk's columns within kColsBudgetFloats.
  const int64_t per_image = std::max<int64_t>(int64_t{kg_} * hwo_, 1);
  const int64_t by_budget = std::max<int64_t>(1, kColsBudgetFloats / per_image);
  const int64_t spread = std::max<int64_t>(1, (batch + 7) / 8);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({batch, by_budget, spread})));
}

bool Conv2d::dw_whole(int batch) const {
  // Large weights and the whole batch's columns kept: one product over the batch beats partials
  // (ResNet-18's 512-channel layers: 2.4 M floats of weights per partial).
  return kind_ == Kind::kIm2col && weight_floats() * tasks(batch) > kPartialBudgetFloats &&
         saved_cols_capacity(batch) >= int64_t{groups_} * kg_ * hwo_ * batch;
}

int Conv2d::dw_partials(int batch) const {
  if (kind_ == Kind::kDirect3x3) {  // one per group of images the kernel sums in registers
    const int group = conv3x3_group(c3_, batch);
    return (batch + group - 1) / group;
  }
  const int64_t per = std::max<int64_t>(weight_floats(), 1);
  return static_cast<int>(
      std::clamp<int64_t>(kPartialBudgetFloats / per, 1, std::max(tasks(batch), 1)));
}

int64_t Conv2d::shared_floats(int batch) const {
  // The weight-gradient partials, or (dw_whole) one group's gathered output gradient.
  const int64_t partials = int64_t{dw_partials(batch)} * weight_floats();
  return std::max(partials, dw_whole(batch) ? int64_t{ocg_} * batch * hwo_ : 0);
}

int64_t Conv2d::saved_cols_capacity(int max_batch) const {
  if (kind_ != Kind::kIm2col) return 0;
  const int64_t per_image = int64_t{groups_} * kg_ * hwo_;
  const int64_t images =
      std::min<int64_t>(max_batch, kSavedColsBudgetFloats / std::max<int64_t>(per_image, 1));
  return std::max<int64_t>(images, 0) * per_image;
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
    case Kind::kDirect:
      direct_scratch_.resize_uninitialized(T * static_cast<size_t>(direct_shape_.scratch_floats()));
      break;
    case Kind::kIm2col:
      // Sized for the largest batch but never zeroed: forward writes the columns before backward
      // reads them, and untouched pages cost nothing (zeroing them cost 0.45 s per trainer).
      saved_cols_.resize_uninitialized(static_cast<size_t>(saved_cols_capacity(max_batch)));
      break;
    case Kind::kOnednn:
      onednn_->reserve(max_batch, threads_);
      break;
    case Kind::kPointwise:
      break;
  }
  saved_in_ = nullptr;
}

int64_t Conv2d::saved_floats(int max_batch) const {
  const int64_t bf16 = precision_ == Precision::kBf16 ? weight_floats() + oc_ : 0;
  switch (kind_) {
    case Kind::kDirect:
      return bf16 + threads_ * direct_shape_.scratch_floats();
    case Kind::kDirect3x3:  // as reserve() sizes its buffers
      return bf16 + c3_.packed_floats() +
             threads_ * (c3_.grad_scratch_floats() +
                         conv3x3_group(c3_, max_batch) *
                             (c3_.padded_in_floats() + c3_.padded_dout_floats()));
    case Kind::kPointwise:
      return bf16;
    case Kind::kOnednn:
      return bf16 + onednn_->saved_floats(max_batch, threads_);
    case Kind::kIm2col:
      break;
  }
  return bf16 + saved_cols_capacity(max_batch);
}

int64_t Conv2d::workspace_at(int b) const {
  switch (kind_) {
    case Kind::kIm2col:
      // shared_floats(), then per thread: cols (Kg, L) reused for dcols, and tmp (OCg, L) of one
      // chunk
      return shared_floats(b) + threads_ * im2col_thread_floats(b);
    case Kind::kOnednn:
      return onednn_->workspace_floats(b, threads_);
    default:
      return shared_floats(b);
  }
}

int64_t Conv2d::kernel_workspace_floats(int batch) const {
  // The largest any batch of up to `batch` images uses (the chunking is not monotonic in the
  // batch): a function of the shapes, `batch` and the thread count alone, so the memory model
  // gets it without reserving.
  int64_t ws = 0;
  for (int b = 1; b <= batch; ++b) ws = std::max(ws, workspace_at(b));
  return ws;
}

int64_t Conv2d::workspace_floats(int batch) const {
  return kernel_workspace_floats(batch) + bf16_workspace_floats(batch);
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

int64_t Conv2d::bf16_workspace_floats(int batch) const {
  if (precision_ != Precision::kBf16) return 0;
  // the rounded input (forward and backward), the rounded output gradient, the input gradient
  // before rounding, and the weight and bias gradients before rounding
  const int64_t B = std::max(batch, 1);
  return B * (in_numel() + out_numel() + in_numel()) + weight_floats() + oc_;
}

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
