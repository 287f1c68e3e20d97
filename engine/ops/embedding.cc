#include "engine/ops/embedding.h"

#include <algorithm>
#include <cstring>

namespace dltune::engine {

namespace {
// The row of token id `v`. Data readers produce ids in [0, vocab); anything else (a model whose
// vocabulary is smaller than its data's) is clamped rather than read out of bounds.
int64_t row_of(float v, int64_t vocab) {
  const auto id = static_cast<int64_t>(v);
  return std::clamp<int64_t>(id, 0, vocab - 1);
}
}  // namespace

void Embedding::forward(const OpContext&, const float* const* in, float* out, int batch) {
  const int64_t T = in_[0][0], C = out_[1], V = attrs().vocab;
  const float* W = params_[0];
  for (int64_t i = 0; i < batch * T; ++i)
    std::memcpy(out + i * C, W + row_of(in[0][i], V) * C, sizeof(float) * C);
}

void Embedding::backward(const OpContext& ctx, const float* const* in, const float*,
                         const float* dout, const GradOut*, int batch) {
  const int64_t T = in_[0][0], C = out_[1], V = attrs().vocab;
  float* dW = grads_[0];
  if (!accumulate_grad(ctx, 0)) std::memset(dW, 0, sizeof(float) * V * C);
  for (int64_t i = 0; i < batch * T; ++i) {
    float* row = dW + row_of(in[0][i], V) * C;
    const float* d = dout + i * C;
    for (int64_t c = 0; c < C; ++c) row[c] += d[c];
  }
}

void PositionEmbedding::forward(const OpContext&, const float* const* in, float* out, int batch) {
  const int64_t T = in_[0][0], C = in_[0][1];
  const float* P = params_[0];
  for (int b = 0; b < batch; ++b) {
    const float* x = in[0] + b * T * C;
    float* y = out + b * T * C;
    for (int64_t i = 0; i < T * C; ++i) y[i] = x[i] + P[i];
  }
}

void PositionEmbedding::backward(const OpContext& ctx, const float* const*, const float*,
                                 const float* dout, const GradOut* din, int batch) {
  const int64_t T = in_[0][0], C = in_[0][1];
  float* dP = grads_[0];  // (context, C): only the first T rows get gradient
  if (!accumulate_grad(ctx, 0)) std::memset(dP, 0, sizeof(float) * attrs().context * C);
  for (int b = 0; b < batch; ++b) {
    const float* d = dout + b * T * C;
    for (int64_t i = 0; i < T * C; ++i) dP[i] += d[i];
  }
  if (din[0].data) store_grad(din[0].data, dout, batch * T * C, din[0].accumulate);
}

}  // namespace dltune::engine
