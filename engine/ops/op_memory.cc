#include "engine/ops/op_memory.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace dltune::engine {
namespace {

using recipes::numel;
using recipes::OpKind;

// Whether 3x3 "same" convolutions may run engine/ops/conv3x3.h's kernels: on a CPU with
// AVX-512, unless DLTUNE_CONV3X3=0 asks for im2col + GEMM (to compare the two).
bool use_conv3x3() {
  static const bool use = [] {
    const char* env = std::getenv("DLTUNE_CONV3X3");  // NOLINT: read once
    if (env != nullptr && std::string(env) == "0") return false;
    return conv3x3_fast();
  }();
  return use;
}

// Where the direct kernels beat im2col + GEMM (measured per layer on this machine's Emerald
// Rapids core, one thread): up to 64 channels in and out (ResNet-18's 64-channel layers at
// 56x56: forward 108 against 167 ms, backward 229 against 312 per 32 images; its 128-channel
// layers already 15 % slower in backward, the 512-channel ones 1.3-1.9x) and an image's padded
// planes within 2 MiB (the weight gradient streams them once per 8 output channels and input
// row; VGG's 224x224 planes would come from memory each time).
bool conv3x3_wins(const Conv3x3Shape& s) {
  return s.c <= 64 && s.oc <= 64 &&
         (s.padded_in_floats() + s.padded_dout_floats()) * 4 <= (int64_t{2} << 20);
}

// The im2col kernel's saved columns and shared scratch (conv2d.h): forward keeps a training
// batch's columns for backward when they fit kSavedColsBudgetFloats; the scratch holds the
// columns (Kg, L) reused for their gradient plus tmp (OCg, L) for the output or gradient of
// one group, for the largest chunk any batch of up to `batch` images uses (a budget-sized
// chunk, or the whole batch when its columns are saved).
OpMemory conv2d_memory(const recipes::OpAttrs& a, const recipes::Shape& in,
                       const recipes::Shape& out, int batch) {
  const Conv2dKernel k = choose_conv2d(a, in, out);
  OpMemory m;
  switch (k.kind) {
    case Conv2dKernel::Kind::kDirect:
      m.saved_floats = k.direct.scratch_floats();  // its own scratch, kept with the layer
      return m;
    case Conv2dKernel::Kind::kConv3x3:
      m.saved_floats =
          k.c3.packed_floats() + k.c3.grad_scratch_floats() +
          conv3x3_group(k.c3, batch) * (k.c3.padded_in_floats() + k.c3.padded_dout_floats());
      return m;
    case Conv2dKernel::Kind::kPointwise:
      return m;
    case Conv2dKernel::Kind::kIm2col:
      break;
  }
  const int64_t groups = a.groups;
  const int64_t kg = in[0] / groups * a.kernel * a.kernel;  // rows of the columns, per group
  const int64_t ocg = a.out / groups;
  const int64_t hwo = out[1] * out[2];
  const int64_t per_image = groups * kg * hwo;
  const int64_t saved_images =
      std::min<int64_t>(batch, kSavedColsBudgetFloats / std::max<int64_t>(per_image, 1));
  m.saved_floats = saved_images * per_image;
  const int64_t budget_chunk = std::min<int64_t>(
      batch, std::max<int64_t>(1, kColsBudgetFloats / std::max<int64_t>(kg * hwo, 1)));
  const int64_t images =
      std::max<int64_t>(saved_images == batch ? batch : budget_chunk, saved_images);
  m.workspace_floats = (kg + ocg) * std::max<int64_t>(images, 1) * hwo;
  return m;
}

}  // namespace

Conv2dKernel choose_conv2d(const recipes::OpAttrs& a, const recipes::Shape& in,
                           const recipes::Shape& out) {
  const auto c = static_cast<int>(in[0]), h = static_cast<int>(in[1]), w = static_cast<int>(in[2]);
  const auto oc = static_cast<int>(a.out), k = static_cast<int>(a.kernel),
             stride = static_cast<int>(a.stride), pad = static_cast<int>(a.pad),
             groups = static_cast<int>(a.groups);
  (void)out;  // the kernels derive the output plane themselves (the op table checked it)
  Conv2dKernel r;
  if (c == 1 && groups == 1 && stride == 1 && k <= 15 && r.direct.init(oc, k, pad, h, w)) {
    r.kind = Conv2dKernel::Kind::kDirect;
  } else if (k == 3 && (stride == 1 || stride == 2) && pad == 1 && groups == 1 && c > 1 &&
             use_conv3x3() && r.c3.init(c, oc, h, w, stride) && conv3x3_wins(r.c3)) {
    r.kind = Conv2dKernel::Kind::kConv3x3;
  } else if (k == 1 && stride == 1 && pad == 0 && groups == 1) {
    r.kind = Conv2dKernel::Kind::kPointwise;
  }
  return r;
}

int conv3x3_group(const Conv3x3Shape& s, int batch) {
  const int64_t vectors = std::max<int64_t>(1, s.span16 / 16);
  return static_cast<int>(std::clamp<int64_t>((64 + vectors - 1) / vectors, 1, std::max(batch, 1)));
}

OpMemory op_memory(const recipes::Node& node, const std::vector<recipes::Shape>& in,
                   const recipes::Shape& out, int batch) {
  const int64_t B = batch;
  OpMemory m;
  switch (node.op) {
    case OpKind::kConv2d:
      return conv2d_memory(node.attrs, in[0], out, batch);
    case OpKind::kDropout:  // the mask
      m.saved_floats = B * numel(in[0]);
      return m;
    case OpKind::kLrn:  // the scale (B, C, H, W); backward's ratio (C, H, W) and plane (H, W)
      m.saved_floats = B * numel(in[0]) + numel(in[0]) + in[0][1] * in[0][2];
      return m;
    case OpKind::kBatchNorm:  // mean and inverse deviation per channel
      m.saved_floats = 2 * in[0][0];
      return m;
    case OpKind::kLayerNorm:  // mean and inverse deviation per row
      m.saved_floats = 2 * B * (numel(in[0]) / in[0].back());
      return m;
    case OpKind::kMaxPool:  // the argmax of each output
      m.saved_floats = B * numel(out);
      return m;
    case OpKind::kAttention:  // the probabilities (B, NH, T, T); dP of one head
      m.saved_floats = B * node.attrs.heads * in[0][0] * in[0][0];
      m.workspace_floats = in[0][0] * in[0][0];
      return m;
    case OpKind::kLinear:
    case OpKind::kAvgPool:
    case OpKind::kAdaptiveAvgPool:
    case OpKind::kRelu:
    case OpKind::kFlatten:
    case OpKind::kAdd:
    case OpKind::kConcat:
    case OpKind::kPadChannels:
    case OpKind::kEmbedding:
    case OpKind::kPositionEmbedding:
    case OpKind::kGelu:
      return m;
  }
  return m;
}

}  // namespace dltune::engine
