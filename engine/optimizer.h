// SGD with momentum and weight decay over the flat parameter buffer (PyTorch's formulation):
//   v = momentum * v + (g + weight_decay * w);   w = w - lr * v
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace dltune::engine {

class Sgd {
 public:
  Sgd(int64_t num_params, float momentum, float weight_decay)
      : velocity_(static_cast<size_t>(num_params)),
        momentum_(momentum),
        weight_decay_(weight_decay) {}

  // One update of params[0, n) from grads[0, n). Precondition: n == num_params.
  void step(float* params, const float* grads, float lr);
  // The momentum buffer (checkpointed with the model).
  Buffer& velocity() { return velocity_; }
  const Buffer& velocity() const { return velocity_; }

 private:
  Buffer velocity_;
  float momentum_, weight_decay_;
};

}  // namespace dltune::engine
