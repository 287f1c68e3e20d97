// Device-side loss and optimizers for the GPU trainer: the same formulas as engine/ops/loss.h
// and engine/optim/optimizer.h, on device pointers, enqueued on the context's compute stream.
// In a build without CUDA these are never reachable (no GpuContext can be created).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/gpu/gpu_context.h"

namespace dltune::engine::gpu {

// row_loss (B doubles) = -log softmax(logits)[label] per row; when dlogits != nullptr,
// dlogits (B, K) = (softmax - onehot(label)) / denom (denom = the GLOBAL batch, as the CPU).
// All pointers are device memory; labels in [0, K) (checked by the data readers).
void softmax_cross_entropy(GpuContext& ctx, const float* logits, const int32_t* labels, int batch,
                           int classes, float denom, float* dlogits, double* row_loss);

// v = momentum * v + (g + weight_decay * w);  w -= lr * v   over n device floats.
void sgd_step(GpuContext& ctx, float* params, const float* grads, float* velocity, int64_t n,
              float lr, float momentum, float weight_decay);

// AdamW::step over n device floats with moments m and v; `step` is the update's number
// (1, 2, ...: the bias correction's t, the optimizer's steps() after the update).
void adamw_step(GpuContext& ctx, float* params, const float* grads, float* m, float* v, int64_t n,
                float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step);

// Doubles of device scratch clip_grad_norm needs.
size_t clip_scratch_doubles();
// Scales grads[0, n) so that their L2 norm is at most max_norm (engine/optim/optimizer.h's
// clip_grad_norm), without a host round trip: the norm is reduced into `scratch` (device,
// clip_scratch_doubles()) in a fixed order and the kernel that scales reads it there.
void clip_grad_norm(GpuContext& ctx, float* grads, int64_t n, double max_norm, double* scratch);

}  // namespace dltune::engine::gpu
