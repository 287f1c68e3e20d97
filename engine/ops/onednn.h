// oneDNN (Debian's libdnnl-dev 2.6, the library PyTorch's CPU convolutions run on) as a kernel
// provider: convolution (forward, backward data, backward weights) and inner products, chosen
// per node by measurement (engine/graph/kernel_select.h) against the engine's own kernels.
//
// How the engine runs it (onednn.cc): primitives are created per shape and cached (one set per
// chunk size of images, below), and they run single-threaded inside the engine's tasks (every
// pool thread sets OpenMP's thread count, oneDNN's runtime here, to 1): the rank's N threads
// are oneDNN's N threads, with no second pool competing for the cores, and the work is cut as
// the engine's own kernels cut it (engine/core/parallel.h): images in chunks fixed by the
// shapes, the weight gradient as one partial per chunk added in chunk order, so the results do
// not depend on the thread count. Activations stay in the engine's NCHW layout: each chunk is
// reordered into the blocked layout oneDNN's AVX2 / AVX-512 kernels use (nChw8c / nChw16c) and
// back, in the thread's scratch (the engine's workspace, which also holds oneDNN's scratchpad:
// scratchpad_mode user).
//
// bf16: where the CPU has AVX512-BF16 or AMX (engine/core/cpu_features.h) the primitives take
// bf16 data and weights with fp32 accumulation; elsewhere the engine's own kernels run the
// documented fallback (engine/core/precision.h), and oneDNN is offered in fp32 only.
//
// Without oneDNN in the build (DLTUNE_WITH_DNNL=OFF, or not found) onednn_available() is false,
// no op offers "onednn", and the engine's own kernels run (onednn_stub.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/precision.h"
#include "engine/core/thread_pool.h"

namespace dltune::engine {

// Whether this build has oneDNN, and its version ("2.6.3") or "".
bool onednn_available();
std::string onednn_version();
// Sets OpenMP (oneDNN's threading runtime here) to one thread in the calling thread; the
// engine's tasks call it before their first primitive. No-op without oneDNN.
void onednn_use_one_thread();

struct OnednnConvShape {
  int c = 0, h = 0, w = 0;     // input planes
  int oc = 0, oh = 0, ow = 0;  // output planes
  int k = 1, stride = 1, pad = 0, groups = 1;
  bool bias = false;
};

// Whether oneDNN runs this convolution in precision `p` on this CPU with a kernel worth
// offering (its JIT kernels; not its reference or GEMM fallbacks, which the engine's own
// im2col beats).
bool onednn_conv_supported(const OnednnConvShape& s, Precision p);

// One convolution on oneDNN, for batches of up to the reserved size, on the rank's threads.
class OnednnConv {
 public:
  virtual ~OnednnConv() = default;
  // Allocates what the primitives keep across calls (none: everything is per call scratch).
  virtual void reserve(int max_batch, int threads) = 0;
  virtual void release() = 0;
  virtual int64_t saved_floats(int max_batch, int threads) const = 0;
  // Scratch of one forward or backward of `batch` images on `threads` threads.
  virtual int64_t workspace_floats(int batch, int threads) const = 0;
  // out (B, OC, OH, OW) = conv(in (B, C, H, W), w (OC, C/groups, K, K)) + b (OC, or null).
  virtual void forward(ThreadPool& pool, const float* in, const float* w, const float* b,
                       float* out, int batch, float* workspace) = 0;
  // din (written, or added when din_acc; skipped when null) and dw (OC, C/groups, K, K;
  // written or added when dw_acc) for dout (B, OC, OH, OW). The bias gradient is the caller's.
  virtual void backward(ThreadPool& pool, const float* in, const float* w, const float* dout,
                        float* din, bool din_acc, float* dw, bool dw_acc, int batch,
                        float* workspace) = 0;
};

// The convolution's oneDNN kernel, or null when onednn_conv_supported() is false.
std::unique_ptr<OnednnConv> make_onednn_conv(const OnednnConvShape& s, Precision p);

// The name of the kernel oneDNN picks for a shape ("jit:avx2"; "" without oneDNN).
std::string onednn_conv_impl(const OnednnConvShape& s, Precision p);

// Whether oneDNN's matmul has a JIT kernel for fp32 on this CPU (Linear's "onednn" kernel).
bool onednn_matmul_supported();

// C (M, N) = op(A) op(B), or C += that when `accumulate`, row-major as parallel_sgemm
// (engine/core/gemm.h) takes them, on the same shape-fixed grid of blocks (K never split), each
// block one single-threaded oneDNN matmul (primitives cached per block shape): the same bits on
// any number of threads. Precondition: onednn_matmul_supported().
void onednn_parallel_matmul(ThreadPool& pool, bool trans_a, bool trans_b, int64_t M, int64_t N,
                            int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                            bool accumulate, float* C, int64_t ldc);

// GFLOP/s of an n x n x n matrix product on one thread, median of timed runs over `seconds`:
// oneDNN's matmul in `p` (bf16: bf16 inputs, fp32 output; needs bf16 support in oneDNN for this
// CPU, else -1), for bench/engine's peak figures. -1 without oneDNN.
double onednn_matmul_gflops(int64_t n, Precision p, double seconds);

}  // namespace dltune::engine
