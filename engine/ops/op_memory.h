// What each CPU kernel allocates beyond its output, as pure functions of the node, its per-sample
// shapes and the batch: the floats it keeps from forward to backward (dropout masks, pooling
// argmax, normalisation statistics, attention probabilities, saved im2col columns, a direct
// convolution's packed weights) and the scratch it shares with the other ops during one pass.
//
// One place for these facts: the kernels report them through Op::saved_floats() and
// Op::workspace_floats(), and the executor's buffer plan (engine/graph/batch_buffers.h) hands
// them to the memory model (planning/memory_model.h) without building a kernel. So this file and
// what it calls (the convolution shapes of conv3x3.h and conv_direct.h) link no BLAS: the
// launcher sizes layouts with them in its own process.
//
// A 2-D convolution's memory depends on which of its kernels runs (conv2d.h): choose_conv2d()
// is that choice, made here for the memory model and in Conv2d::configure() for the kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ops/conv3x3.h"
#include "engine/ops/conv_direct.h"
#include "recipes/model/graph.h"

namespace dltune::engine {

struct OpMemory {
  int64_t saved_floats = 0;      // kept from forward to backward, for the batch asked
  int64_t workspace_floats = 0;  // the shared scratch of one pass, for the batch asked
};

// The memory the CPU kernel of `node` (per-sample input shapes `in`, output `out`, already
// checked by the op table's shape rule) allocates for batches of up to `batch` samples.
OpMemory op_memory(const recipes::Node& node, const std::vector<recipes::Shape>& in,
                   const recipes::Shape& out, int batch);

// Which kernel a 2-D convolution runs on this CPU (conv2d.h says why each):
//   kDirect     one input channel, stride 1, kernel <= 15 (conv_direct.h)
//   kConv3x3    3x3, stride 1 or 2, padding 1, one group, more than one input channel, on a CPU
//               with AVX-512 (unless DLTUNE_CONV3X3=0) and where it beats im2col (<= 64
//               channels in and out, padded planes within 2 MiB)
//   kPointwise  1x1, stride 1, no padding, one group: the input planes are the columns
//   kIm2col     everything else: im2col + one GEMM per group
struct Conv2dKernel {
  enum class Kind { kIm2col, kDirect, kConv3x3, kPointwise };
  Kind kind = Kind::kIm2col;
  DirectConvShape direct;  // kDirect
  Conv3x3Shape c3;         // kConv3x3
};
// `a` the node's attributes; `in` (C, H, W) and `out` (OC, OH, OW) per sample.
Conv2dKernel choose_conv2d(const recipes::OpAttrs& a, const recipes::Shape& in,
                           const recipes::Shape& out);

// The images of a batch the 3x3 kernels' weight gradient sums over before its horizontal sums
// (and so the padded planes they keep): as many as make up 64 vectors of 16 outputs, at most
// the batch.
int conv3x3_group(const Conv3x3Shape& s, int batch);

// The im2col kernel's budgets: its columns for one chunk of images (4 MiB), and the columns of
// a whole training batch a layer keeps for backward when they fit (32 MiB per layer).
inline constexpr int64_t kColsBudgetFloats = int64_t{1} << 20;
inline constexpr int64_t kSavedColsBudgetFloats = int64_t{1} << 23;

}  // namespace dltune::engine
