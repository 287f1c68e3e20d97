// GPU ops: the graph engine's Op interface (engine/ops/op.h) on device memory.
//
// A GPU op is the twin of the CPU op of the same node: the same shapes and parameter layout
// (weights then bias, PyTorch's order), so parameters copy 1:1 between a CPU Model and a
// GpuModel. Every pointer forward/backward take (inputs, outputs, gradients, the bound
// parameters) is DEVICE memory, and the work is enqueued on the context's compute stream (they
// return before it finishes). OpContext::workspace is unused (GPU scratch comes from
// GpuContext::scratch); ctx.seed and ctx.training mean what they mean on the CPU.
//
// Implementations: linear on cuBLAS (FP32, no TF32), conv2d on cuDNN (groups, algorithms picked
// once per batch size by cuDNN's heuristics), pooling (floor mode, padding counted), ReLU,
// dropout (the same counter-based mask as the CPU), LRN and flatten on the engine's own kernels
// (kernels.cu). The ops graphs add (batch norm, add, concat, attention, ...) have no GPU twin
// yet: make_gpu_op says so. Failures inside forward/backward are recorded in the GpuContext
// (take_status()).
#pragma once

#include <memory>

#include "common/result.h"
#include "engine/gpu/gpu_context.h"
#include "engine/ops/op.h"

namespace dltune::engine::gpu {

// The GPU op for `node`, bound to `ctx` (which must outlive it); not yet set up. Errors:
// unsupported in a build without CUDA (kNoCudaBuild), and for an op or attribute without a GPU
// kernel (naming it).
Result<std::unique_ptr<Op>> make_gpu_op(const recipes::Node& node, GpuContext& ctx);

}  // namespace dltune::engine::gpu
