// Optimisers over the flat parameter buffer, in PyTorch's formulations, and clipping by the
// global gradient norm.
//
//   SGD with momentum and (coupled) weight decay:
//     v = momentum v + (g + weight_decay w);   w = w - lr v
//   AdamW (Loshchilov and Hutter; decoupled weight decay), step t = 1, 2, ...:
//     w = w (1 - lr weight_decay)
//     m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
//     w = w - lr / (1 - b1^t) m / (sqrt(v / (1 - b2^t)) + eps)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/core/thread_pool.h"

namespace dltune::engine {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual const char* kind() const = 0;
  // One update of params[0, n) from grads[0, n). Precondition: n == the size it was made for.
  virtual void step(float* params, const float* grads, float lr) = 0;
  // The state a checkpoint keeps (SGD: velocity; AdamW: m, v), each num_params floats.
  virtual std::vector<Buffer*> state() = 0;
  // Updates taken so far (AdamW's bias correction needs it; checkpointed).
  int64_t steps() const { return steps_; }
  void set_steps(int64_t t) { steps_ = t; }
  // The rank's threads: step() updates ranges of the parameters on them (element-wise: the same
  // result on any number). nullptr: one thread.
  void set_thread_pool(ThreadPool* pool) { pool_ = pool ? pool : &ThreadPool::serial(); }

 protected:
  int64_t steps_ = 0;
  ThreadPool* pool_ = &ThreadPool::serial();
};

class Sgd final : public Optimizer {
 public:
  Sgd(int64_t num_params, float momentum, float weight_decay)
      : velocity_(static_cast<size_t>(num_params)),
        momentum_(momentum),
        weight_decay_(weight_decay) {}
  const char* kind() const override { return "sgd"; }
  void step(float* params, const float* grads, float lr) override;
  std::vector<Buffer*> state() override { return {&velocity_}; }
  Buffer& velocity() { return velocity_; }
  const Buffer& velocity() const { return velocity_; }

 private:
  Buffer velocity_;
  float momentum_, weight_decay_;
};

class AdamW final : public Optimizer {
 public:
  AdamW(int64_t num_params, float beta1, float beta2, float eps, float weight_decay)
      : m_(static_cast<size_t>(num_params)),
        v_(static_cast<size_t>(num_params)),
        beta1_(beta1),
        beta2_(beta2),
        eps_(eps),
        weight_decay_(weight_decay) {}
  const char* kind() const override { return "adamw"; }
  void step(float* params, const float* grads, float lr) override;
  std::vector<Buffer*> state() override { return {&m_, &v_}; }

 private:
  Buffer m_, v_;
  float beta1_, beta2_, eps_, weight_decay_;
};

// Scales grads[0, n) so that their L2 norm is at most max_norm (PyTorch's clip_grad_norm_:
// by max_norm / (norm + 1e-6) when that is below 1). Returns the norm before clipping.
// The sum of squares runs over fixed blocks of kNormBlock floats (on the pool's threads), added in
// block order: the same norm on any number of threads.
double clip_grad_norm(float* grads, int64_t n, double max_norm,
                      ThreadPool& pool = ThreadPool::serial());
inline constexpr int64_t kNormBlock = int64_t{1} << 16;

}  // namespace dltune::engine
