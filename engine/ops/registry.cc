// The CPU kernel of every op kind of the op table (recipes/model/ops.h).
#include "engine/ops/attention.h"
#include "engine/ops/combine.h"
#include "engine/ops/conv2d.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/linear.h"
#include "engine/ops/lrn.h"
#include "engine/ops/norm.h"
#include "engine/ops/pool.h"

namespace dltune::engine {

std::unique_ptr<Op> make_cpu_op(recipes::OpKind op) {
  using K = recipes::OpKind;
  switch (op) {
    case K::kLinear:
      return std::make_unique<Linear>();
    case K::kConv2d:
      return std::make_unique<Conv2d>();
    case K::kMaxPool:
    case K::kAvgPool:
    case K::kAdaptiveAvgPool:
      return std::make_unique<Pool2d>();
    case K::kRelu:
      return std::make_unique<Relu>();
    case K::kDropout:
      return std::make_unique<Dropout>();
    case K::kLrn:
      return std::make_unique<Lrn>();
    case K::kFlatten:
      return std::make_unique<Flatten>();
    case K::kBatchNorm:
      return std::make_unique<BatchNorm>();
    case K::kAdd:
      return std::make_unique<Add>();
    case K::kConcat:
      return std::make_unique<Concat>();
    case K::kPadChannels:
      return std::make_unique<PadChannels>();
    case K::kEmbedding:
      return std::make_unique<Embedding>();
    case K::kPositionEmbedding:
      return std::make_unique<PositionEmbedding>();
    case K::kLayerNorm:
      return std::make_unique<LayerNorm>();
    case K::kAttention:
      return std::make_unique<Attention>();
    case K::kGelu:
      return std::make_unique<Gelu>();
  }
  return nullptr;
}

}  // namespace dltune::engine
