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

void adamw_step(GpuContext& ctx, float* params, const float* grads, float* m, float* v, int64_t n,
                float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step) {
  kernels::adamw_step(params, grads, m, v, n,
                      math::adamw_scalars(lr, beta1, beta2, eps, weight_decay, step),
                      stream_of(ctx));
}

size_t clip_scratch_doubles() { return kernels::kClipScratchDoubles; }

void clip_grad_norm(GpuContext& ctx, float* grads, int64_t n, double max_norm, double* scratch) {
  kernels::clip_grad_norm(grads, n, max_norm, scratch, stream_of(ctx));
}

}  // namespace dltune::engine::gpu
