// Embeddings of a language model.
//
//   embedding:          ids (B, T) -> out (B, T, C) = W[ids], W (vocab, C). The ids are the
//                       model's input, integers carried as floats (exact below 2^24); they
//                       have no gradient. dW[id] += dout rows.
//   position_embedding: in (B, T, C) -> out = in + P[t], P (context, C); dP[t] += sum_b dout.
#pragma once

#include "engine/ops/op.h"

namespace dltune::engine {

class Embedding final : public Op {
 public:
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;
};

class PositionEmbedding final : public Op {
 public:
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;
};

}  // namespace dltune::engine
