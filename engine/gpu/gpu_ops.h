// Device-side loss and optimizer for the GPU trainer: the same formulas as engine/loss.h and
// engine/optimizer.h, on device pointers, enqueued on the context's compute stream.
// In a build without CUDA these are never reachable (no GpuContext can be created).
#pragma once

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

}  // namespace dltune::engine::gpu
