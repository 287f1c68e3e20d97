// Internal to the CUDA build of engine/gpu: the common base of the GPU ops. A GPU op is the twin
// of the CPU op of the same node (engine/ops/op.h): the same shapes, parameter layout and
// semantics, on device pointers, enqueued on the context's compute stream.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/gpu/cuda_check.h"
#include "engine/gpu/gpu_context.h"
#include "engine/ops/op.h"

namespace dltune::engine::gpu {

class GpuOp : public Op {
 public:
  explicit GpuOp(GpuContext& ctx) : ctx_(ctx) {}

 protected:
  cudaStream_t stream() const { return stream_of(ctx_); }
  // A device buffer of at least `bytes` in `buf`; records an error and returns false if not.
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
  // The GPU ops of chains never add to a gradient (only graphs with shared inputs do); an op
  // asked to records an unsupported error instead of computing something wrong.
  bool refuse_accumulate(const OpContext& ctx, const GradOut* din) {
    bool acc = din != nullptr && din[0].data != nullptr && din[0].accumulate;
    for (size_t t = 0; t < grads_.size(); ++t) acc = acc || accumulate_grad(ctx, t);
    if (acc)
      ctx_.fail(unsupported(std::string("GPU op ") + kind() +
                            " cannot add to a gradient yet (a graph with shared inputs or "
                            "gradient accumulation); train this model with device cpu"));
    return acc;
  }

  GpuContext& ctx_;
};

// conv2d on cuDNN (gpu_conv.cc).
std::unique_ptr<Op> make_gpu_conv2d(GpuContext& ctx);

}  // namespace dltune::engine::gpu
