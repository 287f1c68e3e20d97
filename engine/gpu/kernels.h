// Launchers of the engine's own CUDA kernels (kernels.cu: element-wise ops, pooling, LRN, loss,
// optimizers; kernels_norm.cu: batch and layer norm; kernels_seq.cu: embeddings and attention's
// softmax). Every launcher enqueues on `s` and returns without waiting; a launch error surfaces
// through cudaGetLastError (GpuContext::take_status). Shapes follow the CPU engine: NCHW,
// row-major, a per-sample size times the batch. The per-element math is kernel_math.h's.
//
// Gradient outputs take `acc`: add to what the buffer holds (GradOut::accumulate,
// Op::accumulate_grad) instead of writing it. Every kernel is deterministic (no atomics, fixed
// reduction orders): the same inputs give the same bits on every run. Internal to the CUDA
// build.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "engine/gpu/kernel_math.h"

namespace dltune::engine::gpu::kernels {

using math::PadShape;
using math::PoolShape;

// ---- element-wise (kernels.cu) ------------------------------------------------------------

// out (rows, cols) = row broadcast to every row (a bias before a gemm with beta = 1).
void fill_rows(float* out, const float* row, int64_t rows, int cols, cudaStream_t s);
// out[0, n) = value.
void fill(float* out, float value, int64_t n, cudaStream_t s);
// dst (+)= src over n floats (engine/ops/op.h's store_grad); dst == src without acc is a no-op.
void store_grad(float* dst, const float* src, int64_t n, bool acc, cudaStream_t s);
// out = a + b; out += x.
void add2(const float* a, const float* b, float* out, int64_t n, cudaStream_t s);
void add_to(float* out, const float* x, int64_t n, cudaStream_t s);
// dst[r dst_pitch + i] (+)= src[r src_pitch + i] for r < rows, i < width (floats): the
// per-sample slices of a channel concatenation.
void copy_rows(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch, int64_t rows,
               int64_t width, bool acc, cudaStream_t s);

// y = max(x, 0); dx (+)= dy where y > 0.
void relu_forward(const float* x, float* y, int64_t n, cudaStream_t s);
void relu_backward(const float* y, const float* dy, float* dx, int64_t n, bool acc, cudaStream_t s);
// GELU (tanh form); backward from the input.
void gelu_forward(const float* x, float* y, int64_t n, cudaStream_t s);
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n, bool acc, cudaStream_t s);
// Inverted dropout with the counter-based mask of engine/core/counter_hash.h:
// mask[i] = counter_uniform(seed, i) < p ? 0 : 1/(1-p); y = x * mask; dx (+)= dy * mask.
void dropout_forward(const float* x, float* y, float* mask, int64_t n, uint64_t seed, float p,
                     cudaStream_t s);
void dropout_backward(const float* dy, const float* mask, float* dx, int64_t n, bool acc,
                      cudaStream_t s);

// ---- pooling, padding, LRN (kernels.cu) -------------------------------------------------------

// Max (argmax: index within the input plane), average or adaptive average pooling with the CPU's
// windows (math::pool_window); backward gathers into every input element (no atomics).
void pool_forward(const float* x, float* y, int32_t* argmax, const PoolShape& p, cudaStream_t s);
void pool_backward(const float* dy, const int32_t* argmax, float* dx, const PoolShape& p, bool acc,
                   cudaStream_t s);
// pad_channels over a batch of `batch` samples.
void pad_forward(const float* x, float* y, const PadShape& p, int batch, cudaStream_t s);
void pad_backward(const float* dy, float* dx, const PadShape& p, int batch, bool acc,
                  cudaStream_t s);

struct LrnShape {
  int batch, c;
  int64_t hw;
  int size;
  float alpha, beta, k;
};
// Cross-channel LRN (engine/ops/lrn.h's formula); scale (B, C, H, W) is saved for backward.
void lrn_forward(const float* x, float* y, float* scale, const LrnShape& l, cudaStream_t s);
void lrn_backward(const float* x, const float* y, const float* dy, const float* scale, float* dx,
                  const LrnShape& l, bool acc, cudaStream_t s);

// position_embedding: y (B, T C) = x + P[0, T C); dP[0, T C) (+)= sum over the batch of dy (in
// sample order; the rows of P past T are the caller's).
void position_forward(const float* x, const float* table, float* y, int batch, int64_t tc,
                      cudaStream_t s);
void position_backward(const float* dy, float* dtable, int batch, int64_t tc, bool acc,
                       cudaStream_t s);

// ---- loss and optimizers (kernels.cu) ---------------------------------------------------------

// Softmax cross-entropy per row (engine/loss.cc's formula): row_loss[n] = -log softmax[label];
// dlogits (B, K) = (softmax - onehot) / denom when dlogits != nullptr.
void softmax_xent(const float* logits, const int32_t* labels, int batch, int classes, float denom,
                  float* dlogits, double* row_loss, cudaStream_t s);
// SGD with momentum and weight decay; AdamW (engine/optim/optimizer.h).
void sgd_step(float* params, const float* grads, float* velocity, int64_t n, float lr, float mu,
              float wd, cudaStream_t s);
void adamw_step(float* params, const float* grads, float* m, float* v, int64_t n,
                const math::AdamwScalars& k, cudaStream_t s);
// Doubles clip_grad_norm needs in `scratch`.
inline constexpr int kNormParts = 1024;
inline constexpr size_t kClipScratchDoubles = kNormParts + 1;
// grads *= max_norm / (norm + 1e-6) when that is below 1 (PyTorch's clip_grad_norm_), the norm
// reduced in double in a fixed order; scratch[kNormParts] receives the squared norm.
void clip_grad_norm(float* grads, int64_t n, double max_norm, double* scratch, cudaStream_t s);

// ---- normalisation (kernels_norm.cu) ----------------------------------------------------------

struct BnShape {
  int batch = 0, c = 0;
  int64_t s = 1;  // values per channel and sample
  double eps = 1e-5, momentum = 0.1;
  DLTUNE_HOST_DEVICE int64_t n() const { return int64_t{batch} * s; }
};
// Doubles of partial sums the batch-norm kernels need (per channel, per part, two).
inline size_t bn_partial_doubles(int channels) { return size_t(channels) * math::kBnMaxParts * 2; }
// Training: the batch's statistics (saved in mean, invstd (C)), running statistics and the
// counter (running_mean, running_var (C), count (1)) updated; evaluation: the running ones.
// Then y = normalised x, scaled and shifted.
void batchnorm_forward(const float* x, float* y, const float* w, const float* b,
                       float* running_mean, float* running_var, float* count, float* mean,
                       float* invstd, double* partials, const BnShape& sh, bool training,
                       cudaStream_t s);
// dw, db (C) written or added (acc_w, acc_b); dx (nullable) written or added (acc_x). coefs
// (3 C floats) is scratch. `training`: the mode of the forward that saved mean / invstd.
void batchnorm_backward(const float* x, const float* dy, float* dx, const float* w,
                        const float* mean, const float* invstd, float* dw, float* db, float* coefs,
                        double* partials, const BnShape& sh, bool training, bool acc_w, bool acc_b,
                        bool acc_x, cudaStream_t s);

// Floats of partial sums the layer-norm backward needs.
inline size_t ln_partial_floats(int64_t rows, int c) {
  return size_t(math::ln_parts(rows)) * size_t(c) * 2;
}
// x (rows, C) -> y; mean, rstd (rows) saved for backward.
void layernorm_forward(const float* x, float* y, const float* w, const float* b, float* mean,
                       float* rstd, int64_t rows, int c, float eps, cudaStream_t s);
void layernorm_backward(const float* x, const float* dy, float* dx, const float* w,
                        const float* mean, const float* rstd, float* dw, float* db, float* partials,
                        int64_t rows, int c, bool acc_w, bool acc_b, bool acc_x, cudaStream_t s);

// ---- sequences (kernels_seq.cu) ---------------------------------------------------------------

// Rows of (T, T) blocks: row r is position t = r % T; softmax over s <= t, zero above.
void causal_softmax(float* probs, int64_t rows, int t, cudaStream_t s);
// For `members` (T, T) blocks of dP (contiguous) and their P (block stride p_stride):
// dP <- P (dP - rowsum(dP P)) scale, zero above the diagonal.
void causal_softmax_grad(const float* p, int64_t p_stride, float* dp, int members, int t,
                         float scale, cudaStream_t s);

// out (n, C) = W[row(ids)] (math::embedding_row).
void embedding_forward(const float* ids, const float* table, float* out, int64_t n, int c,
                       int64_t vocab, cudaStream_t s);
// Bytes of scratch embedding_backward needs for n positions.
size_t embedding_scratch_bytes(int64_t n, int64_t vocab);
// dW (vocab, C) (+)= the rows of dout (n, C) at their ids, deterministically: the positions
// are sorted by id (a stable radix sort), then each id's rows are added in position order, the
// CPU's order (so the result is the CPU's to the bit). Without acc, dW is zeroed first. Returns
// the error of a call that failed to enqueue (a scratch smaller than embedding_scratch_bytes is
// cudaErrorInvalidValue); n < 2^31.
cudaError_t embedding_backward(const float* ids, const float* dout, float* dtable, int64_t n, int c,
                               int64_t vocab, bool acc, void* scratch, size_t scratch_bytes,
                               cudaStream_t s);

}  // namespace dltune::engine::gpu::kernels
