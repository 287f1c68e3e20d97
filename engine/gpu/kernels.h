// Launchers of the engine's own CUDA kernels (kernels.cu), for the GPU layers, the loss and
// the optimizer. Every launcher enqueues on `s` and returns without waiting; launch errors
// surface through cudaGetLastError (GpuContext::take_status). Shapes follow the CPU engine:
// NCHW, row-major, a per-sample size times the batch. Internal to the CUDA build.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace dltune::engine::gpu::kernels {

// out (rows, cols) = row broadcast to every row (a bias before a gemm with beta = 1).
void fill_rows(float* out, const float* row, int rows, int cols, cudaStream_t s);
// out (cols) = sum over rows of x (rows, cols) (a bias gradient).
void col_sum(const float* x, int rows, int cols, float* out, cudaStream_t s);

// y = max(x, 0); dx = dy where y > 0 (n elements).
void relu_forward(const float* x, float* y, int64_t n, cudaStream_t s);
void relu_backward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t s);

// Inverted dropout with the counter-based mask of engine/gpu/counter_hash.h:
// mask[i] = counter_uniform(seed, i) < p ? 0 : 1/(1-p); y = x * mask.
void dropout_forward(const float* x, float* y, float* mask, int64_t n, uint64_t seed, float p,
                     cudaStream_t s);
// out = a * b element-wise.
void multiply(const float* a, const float* b, float* out, int64_t n, cudaStream_t s);

struct PoolShape {
  int planes;  // B * C
  int h, w, oh, ow;
  int k, stride, pad;
};
// Max pooling with the CPU's tie rule (the first maximum in row-major window order wins);
// argmax holds the index within the input plane.
void maxpool_forward(const float* x, float* y, int32_t* argmax, const PoolShape& p, cudaStream_t s);
// dx (zeroed here) += dy at argmax.
void maxpool_backward(const float* dy, const int32_t* argmax, float* dx, const PoolShape& p,
                      cudaStream_t s);
// Average pooling counting padding in the divisor (k*k always, as engine/pool.cc).
void avgpool_forward(const float* x, float* y, const PoolShape& p, cudaStream_t s);
void avgpool_backward(const float* dy, float* dx, const PoolShape& p, cudaStream_t s);

struct LrnShape {
  int batch, c;
  int64_t hw;
  int size;
  float alpha, beta, k;
};
// Cross-channel LRN (engine/lrn.h's formula); scale (B, C, H, W) is saved for backward.
void lrn_forward(const float* x, float* y, float* scale, const LrnShape& l, cudaStream_t s);
void lrn_backward(const float* x, const float* y, const float* dy, const float* scale, float* dx,
                  const LrnShape& l, cudaStream_t s);

// Softmax cross-entropy per row (engine/loss.cc's formula): row_loss[n] = -log softmax[label];
// dlogits (B, K) = (softmax - onehot) / denom when dlogits != nullptr.
void softmax_xent(const float* logits, const int32_t* labels, int batch, int classes, float denom,
                  float* dlogits, double* row_loss, cudaStream_t s);

// SGD with momentum and weight decay (engine/optimizer.cc):
//   v = mu * v + (g + wd * w);  w -= lr * v
void sgd_step(float* params, const float* grads, float* velocity, int64_t n, float lr, float mu,
              float wd, cudaStream_t s);

}  // namespace dltune::engine::gpu::kernels
