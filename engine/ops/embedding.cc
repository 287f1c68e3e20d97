#include "engine/ops/embedding.h"

#include <algorithm>
#include <cstring>

#include "engine/core/parallel.h"

namespace dltune::engine {

namespace {
// The row of token id `v`. Data readers produce ids in [0, vocab); anything else (a model whose
// vocabulary is smaller than its data's) is clamped rather than read out of bounds.
int64_t row_of(float v, int64_t vocab) {
  const auto id = static_cast<int64_t>(v);
  return std::clamp<int64_t>(id, 0, vocab - 1);
}
}  // namespace

void Embedding::forward(const OpContext& ctx, const float* const* in, float* out, int batch) {
  const int64_t T = in_[0][0], C = out_[1], V = attrs().vocab;
  const float* W = params_[0];
  const int64_t rows = batch * T;
  parallel_ranges(*ctx.pool, rows, task_count(rows, static_cast<double>(C), 16384.0),
                  [&](int64_t r0, int64_t r1, int) {
                    for (int64_t i = r0; i < r1; ++i)
                      std::memcpy(out + i * C, W + row_of(in[0][i], V) * C, sizeof(float) * C);
                  });
}

void Embedding::backward(const OpContext& ctx, const float* const* in, const float*,
                         const float* dout, const GradOut*, int batch) {
  // dW[id] += dout rows, rows in order: two rows of one id meet, so the threads split the
  // vocabulary (a task owns its ids' rows and walks every position in order: the same adds in
  // the same order whatever the split).
  const int64_t T = in_[0][0], C = out_[1], V = attrs().vocab;
  float* dW = grads_[0];
  const bool acc = accumulate_grad(ctx, 0);
  const int64_t rows = batch * T;
  const int64_t parts =
      ctx.pool->threads() == 1 ? 1 : task_count(V, static_cast<double>(C), 16384.0);
  parallel_ranges(*ctx.pool, V, parts, [&](int64_t v0, int64_t v1, int) {
    if (!acc) std::memset(dW + v0 * C, 0, sizeof(float) * (v1 - v0) * C);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t id = row_of(in[0][i], V);
      if (id < v0 || id >= v1) continue;
      float* row = dW + id * C;
      const float* d = dout + i * C;
      for (int64_t c = 0; c < C; ++c) row[c] += d[c];
    }
  });
}

void PositionEmbedding::forward(const OpContext& ctx, const float* const* in, float* out,
                                int batch) {
  const int64_t T = in_[0][0], C = in_[0][1];
  const float* P = params_[0];
  ctx.pool->run(batch, [&](int64_t b, int) {
    const float* x = in[0] + b * T * C;
    float* y = out + b * T * C;
    for (int64_t i = 0; i < T * C; ++i) y[i] = x[i] + P[i];
  });
}

void PositionEmbedding::backward(const OpContext& ctx, const float* const*, const float*,
                                 const float* dout, const GradOut* din, int batch) {
  const int64_t T = in_[0][0], C = in_[0][1];
  float* dP = grads_[0];  // (context, C): only the first T rows get gradient
  const bool acc = accumulate_grad(ctx, 0);
  if (!acc) std::memset(dP + T * C, 0, sizeof(float) * (attrs().context - T) * C);
  // dP[i] (+)= sum over the batch in order: the threads split i.
  parallel_elements(*ctx.pool, T * C, [&](int64_t i0, int64_t i1, int) {
    if (!acc) std::memset(dP + i0, 0, sizeof(float) * (i1 - i0));
    for (int b = 0; b < batch; ++b) {
      const float* d = dout + b * T * C;
      for (int64_t i = i0; i < i1; ++i) dP[i] += d[i];
    }
  });
  if (din[0].data) store_grad(*ctx.pool, din[0].data, dout, batch * T * C, din[0].accumulate);
}

}  // namespace dltune::engine
