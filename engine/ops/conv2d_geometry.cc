#include "engine/ops/conv2d_geometry.h"

#include <algorithm>
#include <cstdlib>

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

Conv2dKind conv2d_kind(const std::string& kernel) {
  return kernel == "direct"      ? Conv2dKind::kDirect
         : kernel == "direct3x3" ? Conv2dKind::kDirect3x3
         : kernel == "winograd"  ? Conv2dKind::kWinograd
         : kernel == "pointwise" ? Conv2dKind::kPointwise
         : kernel == "onednn"    ? Conv2dKind::kOnednn
                                 : Conv2dKind::kIm2col;
}

void Conv2dGeometry::init(const recipes::OpAttrs& a, const recipes::Shape& in,
                          const recipes::Shape& out) {
  oc_ = static_cast<int>(a.out);
  k_ = static_cast<int>(a.kernel);
  stride_ = static_cast<int>(a.stride);
  pad_ = static_cast<int>(a.pad);
  groups_ = static_cast<int>(a.groups);
  c_ = static_cast<int>(in[0]);
  h_ = static_cast<int>(in[1]);
  w_ = static_cast<int>(in[2]);
  oh_ = static_cast<int>(out[1]);
  ow_ = static_cast<int>(out[2]);
  cg_ = c_ / groups_;
  ocg_ = oc_ / groups_;
  kg_ = cg_ * k_ * k_;
  hwo_ = int64_t{oh_} * ow_;
  can_direct_ = c_ == 1 && groups_ == 1 && stride_ == 1 && k_ <= 15 &&
                direct_shape_.init(oc_, k_, pad_, h_, w_);
  can_3x3_ = k_ == 3 && (stride_ == 1 || stride_ == 2) && pad_ == 1 && groups_ == 1 && c_ > 1 &&
             conv3x3_fast() && c3_.init(c_, oc_, h_, w_, stride_);
  can_pointwise_ = k_ == 1 && stride_ == 1 && pad_ == 0 && groups_ == 1;
  can_winograd_ = k_ == 3 && stride_ == 1 && pad_ == 1 && groups_ == 1 && winograd_runs() &&
                  wino_.init(c_, oc_, h_, w_);
}

std::vector<std::string> Conv2dGeometry::own_kernels() const {
  std::vector<std::string> k;
  if (can_direct_) k.push_back("direct");
  const bool wins3x3 = can_3x3_ && conv3x3_default() && conv3x3_wins(c3_);
  if (wins3x3) k.push_back("direct3x3");
  if (can_pointwise_) k.push_back("pointwise");
  k.push_back("im2col");
  if (can_3x3_ && !wins3x3) k.push_back("direct3x3");
  if (can_winograd_) k.push_back("winograd");
  return k;
}

int Conv2dGeometry::images_per_task(int batch) const {
  // At least 8 chunks where the batch allows (work for up to 8 threads, 4 images each at batch
  // 32), and a chunk's columns within kColsBudgetFloats.
  const int64_t per_image = std::max<int64_t>(int64_t{kg_} * hwo_, 1);
  const int64_t by_budget = std::max<int64_t>(1, kColsBudgetFloats / per_image);
  const int64_t spread = std::max<int64_t>(1, (batch + 7) / 8);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({batch, by_budget, spread})));
}

int64_t Conv2dGeometry::saved_cols_capacity(Conv2dKind kind, int max_batch) const {
  if (kind != Conv2dKind::kIm2col) return 0;
  const int64_t per_image = int64_t{groups_} * kg_ * hwo_;
  const int64_t images =
      std::min<int64_t>(max_batch, kSavedColsBudgetFloats / std::max<int64_t>(per_image, 1));
  return std::max<int64_t>(images, 0) * per_image;
}

bool Conv2dGeometry::dw_whole(Conv2dKind kind, int batch) const {
  // Large weights and the whole batch's columns kept: one product over the batch beats partials
  // (ResNet-18's 512-channel layers: 2.4 M floats of weights per partial).
  return kind == Conv2dKind::kIm2col && weight_floats() * tasks(batch) > kPartialBudgetFloats &&
         saved_cols_capacity(kind, batch) >= int64_t{groups_} * kg_ * hwo_ * batch;
}

int Conv2dGeometry::dw_partials(Conv2dKind kind, int batch) const {
  if (kind == Conv2dKind::kDirect3x3) {  // one per group of images the kernel sums in registers
    const int group = conv3x3_group(c3_, batch);
    return (batch + group - 1) / group;
  }
  const int64_t per = std::max<int64_t>(weight_floats(), 1);
  return static_cast<int>(
      std::clamp<int64_t>(kPartialBudgetFloats / per, 1, std::max(tasks(batch), 1)));
}

int64_t Conv2dGeometry::shared_floats(Conv2dKind kind, int batch) const {
  const int64_t partials = int64_t{dw_partials(kind, batch)} * weight_floats();
  return std::max(partials, dw_whole(kind, batch) ? int64_t{ocg_} * batch * hwo_ : 0);
}

int64_t Conv2dGeometry::bf16_workspace_floats(Precision p, int batch) const {
  if (p != Precision::kBf16) return 0;
  const int64_t B = std::max(batch, 1);
  const int64_t in = int64_t{c_} * h_ * w_, out = int64_t{oc_} * hwo_;
  return B * (in + out + in) + weight_floats() + oc_;
}

int64_t Conv2dGeometry::workspace_at(Conv2dKind kind, int b, int threads) const {
  switch (kind) {
    case Conv2dKind::kIm2col:
      return shared_floats(kind, b) + threads * im2col_thread_floats(b);
    case Conv2dKind::kWinograd:
      return shared_floats(kind, b) + threads * wino_.scratch_floats();
    case Conv2dKind::kOnednn:
      return 0;  // oneDNN's own (Op::library_memory())
    default:
      return shared_floats(kind, b);
  }
}

OpMemory Conv2dGeometry::memory(Conv2dKind kind, int batch, int threads, Precision p) const {
  OpMemory m;
  // bf16: the rounded weights and bias, kept with the layer.
  m.saved_floats = p == Precision::kBf16 ? weight_floats() + oc_ : 0;
  switch (kind) {
    case Conv2dKind::kDirect:
      m.saved_floats += threads * direct_shape_.scratch_floats();
      break;
    case Conv2dKind::kDirect3x3:
      m.saved_floats +=
          c3_.packed_floats() + threads * (c3_.grad_scratch_floats() +
                                           conv3x3_group(c3_, batch) *
                                               (c3_.padded_in_floats() + c3_.padded_dout_floats()));
      break;
    case Conv2dKind::kWinograd:
      m.saved_floats += wino_.packed_floats();
      break;
    case Conv2dKind::kIm2col:
      m.saved_floats += saved_cols_capacity(kind, batch);
      break;
    case Conv2dKind::kPointwise:
    case Conv2dKind::kOnednn:
      break;
  }
  // The largest any batch of up to `batch` images uses (the chunking is not monotonic in it).
  int64_t ws = 0;
  for (int b = 1; b <= batch; ++b) ws = std::max(ws, workspace_at(kind, b, threads));
  m.workspace_floats = ws + bf16_workspace_floats(p, batch);
  return m;
}

}  // namespace dltune::engine
