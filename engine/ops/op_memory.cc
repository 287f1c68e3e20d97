#include "engine/ops/op_memory.h"

#include <algorithm>

#include "engine/ops/conv2d_geometry.h"

namespace dltune::engine {
namespace {

using recipes::numel;
using recipes::OpKind;

OpMemory conv2d_memory(const recipes::OpAttrs& a, const recipes::Shape& in,
                       const recipes::Shape& out, int batch, const OpCompute& c) {
  Conv2dGeometry g;
  g.init(a, in, out);
  const std::vector<std::string> own = g.own_kernels();
  const bool known =
      c.kernel == "onednn" || std::find(own.begin(), own.end(), c.kernel) != own.end();
  return g.memory(conv2d_kind(known ? c.kernel : own.front()), batch, c.threads, c.precision);
}

}  // namespace

int64_t attention_thread_floats(int64_t t, int64_t hs, Precision p) {
  return t * t + (p == Precision::kBf16 ? 7 * t * hs : 0);
}

int64_t layer_norm_row_blocks(int64_t rows, int64_t c) {
  const int64_t per = std::max<int64_t>(1, kLayerNormBlockFloats / std::max<int64_t>(c, 1));
  return std::max<int64_t>(1, (rows + per - 1) / per);
}

OpMemory op_memory(const recipes::Node& node, const std::vector<recipes::Shape>& in,
                   const recipes::Shape& out, int batch, const OpCompute& c) {
  const int64_t B = batch, T = std::max(c.threads, 1);
  const bool bf16 = c.precision == Precision::kBf16;
  OpMemory m;
  switch (node.op) {
    case OpKind::kConv2d:
      return conv2d_memory(node.attrs, in[0], out, batch,
                           {static_cast<int>(T), c.precision, c.kernel});
    case OpKind::kDropout:  // the mask
      m.saved_floats = B * numel(in[0]);
      return m;
    case OpKind::kLrn:  // the scale (B, C, H, W); per thread backward's ratio (C, H, W) and plane
      m.saved_floats = B * numel(in[0]) + T * (numel(in[0]) + in[0][1] * in[0][2]);
      return m;
    case OpKind::kBatchNorm:  // mean and inverse deviation per channel
      m.saved_floats = 2 * in[0][0];
      return m;
    case OpKind::kLayerNorm: {  // mean and inverse deviation per row; two partials per block
      const int64_t feats = in[0].back(), rows = numel(in[0]) / feats;
      m.saved_floats = 2 * B * rows;
      m.workspace_floats = 2 * layer_norm_row_blocks(B * rows, feats) * feats;
      return m;
    }
    case OpKind::kMaxPool:  // the argmax of each output
      m.saved_floats = B * numel(out);
      return m;
    case OpKind::kAttention: {  // the probabilities (B, NH, T, T); per thread, one head's scratch
      const int64_t t = in[0][0], hs = in[0][1] / 3 / node.attrs.heads;
      m.saved_floats = B * node.attrs.heads * t * t;
      m.workspace_floats = T * attention_thread_floats(t, hs, c.precision);
      return m;
    }
    case OpKind::kLinear: {  // bf16: the rounded weight and bias; the operands' rounded copies
      if (!bf16) return m;
      const int64_t features = node.attrs.flatten ? numel(in[0]) : in[0].back();
      const int64_t rows = numel(in[0]) / features, o = node.attrs.out;
      m.saved_floats = features * o + o;
      m.workspace_floats = B * rows * (2 * features + o) + features * o + o;
      return m;
    }
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
