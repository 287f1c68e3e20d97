// GPU layers: the engine's Layer interface (engine/layer.h) on device memory.
//
// A GPU layer is the twin of the CPU layer of the same LayerSpec: the same setup() validation
// and messages, the same num_params() and parameter layout (weights then bias, PyTorch's
// order), the same init_params() values, so parameters copy 1:1 between a CPU Model and a
// GpuModel. Only forward/backward differ: every pointer they take (in, out, dout, din, the
// bound params and grads) is DEVICE memory, and the work is enqueued on the context's compute
// stream (they return before it finishes). LayerContext::workspace is unused (GPU scratch
// comes from GpuContext::scratch); ctx.seed and ctx.training mean what they mean on the CPU.
//
// Implementations: linear on cuBLAS (FP32, no TF32), conv2d on cuDNN (groups, algorithms
// picked once per batch size by cuDNN's heuristics), pooling, ReLU, dropout (the same
// counter-based mask as the CPU), LRN and flatten on the engine's own kernels (kernels.cu).
// Failures inside forward/backward are recorded in the GpuContext (take_status()).
#pragma once

#include <memory>

#include "common/result.h"
#include "engine/gpu/gpu_context.h"
#include "engine/layer.h"

namespace dltune::engine::gpu {

// The GPU layer for `spec`, bound to `ctx` (which must outlive it); not yet set up.
// Errors: unsupported in a build without CUDA (kNoCudaBuild).
Result<std::unique_ptr<Layer>> make_gpu_layer(const LayerSpec& spec, GpuContext& ctx);

}  // namespace dltune::engine::gpu
