#include "engine/optim/optimizer.h"

#include <cmath>
#include <vector>

#include "engine/core/parallel.h"

namespace dltune::engine {

void Sgd::step(float* __restrict w, const float* __restrict g, float lr) {
  float* __restrict v = velocity_.data();
  const float mu = momentum_, wd = weight_decay_;
  parallel_elements(*pool_, static_cast<int64_t>(velocity_.size()), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      v[i] = mu * v[i] + (g[i] + wd * w[i]);
      w[i] -= lr * v[i];
    }
  });
  ++steps_;
}

void AdamW::step(float* __restrict w, const float* __restrict g, float lr) {
  ++steps_;
  float* __restrict m = m_.data();
  float* __restrict v = v_.data();
  const double t = static_cast<double>(steps_);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(beta1_, t)));
  const float inv_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(beta2_, t)));
  const float decay = 1.0f - lr * weight_decay_;
  const float b1 = beta1_, b2 = beta2_, eps = eps_;
  parallel_elements(*pool_, static_cast<int64_t>(m_.size()), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      w[i] *= decay;
      m[i] = b1 * m[i] + (1.0f - b1) * g[i];
      v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
      w[i] -= step_size * m[i] / (std::sqrt(v[i]) * inv_bc2 + eps);
    }
  });
}

double clip_grad_norm(float* grads, int64_t n, double max_norm, ThreadPool& pool) {
  const int64_t blocks = (n + kNormBlock - 1) / kNormBlock;
  std::vector<double> part(static_cast<size_t>(blocks));
  pool.run(blocks, [&](int64_t k, int) {
    const int64_t b = k * kNormBlock, e = std::min(n, b + kNormBlock);
    double sq = 0.0;
    for (int64_t i = b; i < e; ++i) sq += static_cast<double>(grads[i]) * grads[i];
    part[static_cast<size_t>(k)] = sq;
  });
  double sq = 0.0;
  for (double p : part) sq += p;
  const double norm = std::sqrt(sq);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    const auto c = static_cast<float>(coef);
    parallel_elements(pool, n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) grads[i] *= c;
    });
  }
  return norm;
}

}  // namespace dltune::engine
