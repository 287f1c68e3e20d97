// Internal to the CUDA build of engine/gpu: the common base of the GPU ops. A GPU op is the twin
// of the CPU op of the same node (engine/ops/op.h): the same shapes, parameter layout and
// semantics (gradients written or added per GradOut::accumulate and accumulate_grad), on device
// pointers, enqueued on the context's compute stream. Failures are recorded in the context.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/gpu/cuda_check.h"
#include "engine/gpu/gemm_plan.h"
#include "engine/gpu/gpu_context.h"
#include "engine/ops/op.h"

namespace dltune::engine::gpu {

class GpuOp : public Op {
 public:
  explicit GpuOp(GpuContext& ctx) : ctx_(ctx) {}

 protected:
  cudaStream_t stream() const { return stream_of(ctx_); }
  // A device buffer of at least `bytes` in `buf` (kept when it is large enough, else replaced by
  // a zeroed one); records an error and returns false if the allocation fails.
  bool ensure(DeviceBuffer& buf, size_t bytes, const char* what) {
    if (buf.bytes() >= bytes) return true;
    buf = DeviceBuffer();
    auto b = DeviceBuffer::alloc(bytes);
    if (!b) {
      ctx_.fail(b.error().wrap(std::string(kind()) + ": allocating the " + what));
      return false;
    }
    buf = std::move(*b);
    return true;
  }
  // Enqueues `g` with cublasSgemm (batch 1) or cublasSgemmStridedBatched; records a failure
  // (also an invalid description: a bug, never sent to cuBLAS) and returns false.
  bool gemm(const Gemm& g, const char* what) {
    if (!gemm_valid(g)) {
      ctx_.fail(internal_error(std::string(kind()) + ": " + what + ": invalid GEMM (m " +
                               std::to_string(g.m) + ", n " + std::to_string(g.n) + ", k " +
                               std::to_string(g.k) + ", ld " + std::to_string(g.lda) + "/" +
                               std::to_string(g.ldb) + "/" + std::to_string(g.ldc) + ")"));
      return false;
    }
    const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (g.batch == 1)
      return cublas_ok(ctx_,
                       cublasSgemm(cublas_of(ctx_), ta, tb, g.m, g.n, g.k, &g.alpha, g.a, g.lda,
                                   g.b, g.ldb, &g.beta, g.c, g.ldc),
                       what);
    return cublas_ok(ctx_,
                     cublasSgemmStridedBatched(cublas_of(ctx_), ta, tb, g.m, g.n, g.k, &g.alpha,
                                               g.a, g.lda, g.stride_a, g.b, g.ldb, g.stride_b,
                                               &g.beta, g.c, g.ldc, g.stride_c, g.batch),
                     what);
  }
  // Records a failure of something enqueued outside cuBLAS / cuDNN (a CUB sort, a memset).
  bool cuda(cudaError_t e, const char* what) { return cuda_ok(ctx_, e, what); }

  GpuContext& ctx_;
};

// The factories of gpu_layers.h's make_gpu_op, by file. Each returns an op not yet set up.
std::unique_ptr<Op> make_gpu_conv2d(GpuContext& ctx);        // gpu_conv.cc
std::unique_ptr<Op> make_gpu_add(GpuContext& ctx);           // gpu_graph_ops.cc
std::unique_ptr<Op> make_gpu_concat(GpuContext& ctx);        // gpu_graph_ops.cc
std::unique_ptr<Op> make_gpu_pad_channels(GpuContext& ctx);  // gpu_graph_ops.cc
std::unique_ptr<Op> make_gpu_embedding(GpuContext& ctx);     // gpu_graph_ops.cc
std::unique_ptr<Op> make_gpu_position(GpuContext& ctx);      // gpu_graph_ops.cc
std::unique_ptr<Op> make_gpu_batchnorm(GpuContext& ctx);     // gpu_norm.cc
std::unique_ptr<Op> make_gpu_layernorm(GpuContext& ctx);     // gpu_norm.cc
std::unique_ptr<Op> make_gpu_attention(GpuContext& ctx);     // gpu_attention.cc

}  // namespace dltune::engine::gpu
