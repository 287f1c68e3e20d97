// The CUDA implementation of gpu_ops.h (compiled only when DLTUNE_HAVE_CUDA).
#include "engine/gpu/gpu_ops.h"

#include "engine/gpu/cuda_check.h"
#include "engine/gpu/kernels.h"

namespace dltune::engine::gpu {

void softmax_cross_entropy(GpuContext& ctx, const float* logits, const int32_t* labels, int batch,
                           int classes, float denom, float* dlogits, double* row_loss) {
  kernels::softmax_xent(logits, labels, batch, classes, denom, dlogits, row_loss, stream_of(ctx));
}

void sgd_step(GpuContext& ctx, float* params, const float* grads, float* velocity, int64_t n,
              float lr, float momentum, float weight_decay) {
  kernels::sgd_step(params, grads, velocity, n, lr, momentum, weight_decay, stream_of(ctx));
}

}  // namespace dltune::engine::gpu
