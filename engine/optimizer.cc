#include "engine/optimizer.h"

namespace dltune::engine {

void Sgd::step(float* __restrict params, const float* __restrict grads, float lr) {
  float* __restrict v = velocity_.data();
  const int64_t n = static_cast<int64_t>(velocity_.size());
  const float mu = momentum_, wd = weight_decay_;
  for (int64_t i = 0; i < n; ++i) {
    v[i] = mu * v[i] + (grads[i] + wd * params[i]);
    params[i] -= lr * v[i];
  }
}

}  // namespace dltune::engine
