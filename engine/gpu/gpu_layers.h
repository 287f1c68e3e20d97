// GPU ops: the graph engine's Op interface (engine/ops/op.h) on device memory.
//
// A GPU op is the twin of the CPU op of the same node: the same shapes, parameter and state
// layout (weights then bias, PyTorch's order), the same gradient contract (GradOut::accumulate
// and accumulate_grad: written or added), so parameters copy 1:1 between a CPU Model and a
// GpuModel. Every pointer forward/backward take (inputs, outputs, gradients, the bound
// parameters and state) is DEVICE memory, and the work is enqueued on the context's compute
// stream (they return before it finishes). OpContext::workspace is unused (GPU scratch comes
// from GpuContext::scratch or the op's own buffers); ctx.seed and ctx.training mean what they
// mean on the CPU.
//
// Every op kind of the table has a twin, FP32 throughout (cuBLAS and cuDNN without TF32):
//   linear          cuBLAS GEMMs (gemm_plan.h), bias gradient as a product with ones
//   conv2d          cuDNN (gpu_conv.cc)
//   pools           the CPU's window rule (ceil_mode, count_include_pad, adaptive), gathers
//   relu, gelu, dropout, flatten, lrn, add, concat, pad_channels, position_embedding
//                   element-wise kernels
//   batchnorm       own kernels: per-channel partial sums in double, running statistics with
//                   PyTorch's momentum and unbiased variance, num_batches_tracked
//   layernorm       a warp per row; parameter gradients as column sums over row ranges
//   embedding       gather; backward a stable sort by id then per-id sums in position order
//   attention       cuBLAS strided-batched GEMMs for Q K^T, P V and their gradients around a
//                   causal softmax kernel; probabilities kept for backward (engine/ops/attention.h)
// All deterministic (no atomics, fixed reduction orders). Failures inside forward/backward are
// recorded in the GpuContext (take_status()).
#pragma once

#include <memory>

#include "common/result.h"
#include "engine/gpu/gpu_context.h"
#include "engine/ops/op.h"

namespace dltune::engine::gpu {

// The GPU op for `node`, bound to `ctx` (which must outlive it); not yet set up. Errors:
// unsupported in a build without CUDA (kNoCudaBuild).
Result<std::unique_ptr<Op>> make_gpu_op(const recipes::Node& node, GpuContext& ctx);

}  // namespace dltune::engine::gpu
