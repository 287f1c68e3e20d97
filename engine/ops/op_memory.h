// What each CPU kernel allocates beyond its output, as pure functions of the node, its per-sample
// shapes and the batch: the floats it keeps from forward to backward (dropout masks, pooling
// argmax, normalisation statistics, attention probabilities, saved im2col columns, a direct
// convolution's packed weights) and the scratch it shares with the other ops during one pass.
//
// One place for these facts: the kernels report them through Op::saved_floats() and
// Op::workspace_floats(), and the executor's buffer plan (engine/graph/batch_buffers.h) hands
// them to the memory model (planning/memory_model.h) without building a kernel. So this file and
// what it calls (the convolution geometry of conv2d_geometry.h) link no BLAS: the
// launcher sizes layouts with them in its own process.
//
// What the kernels allocate depends on how the rank computes (OpCompute): per-thread scratch
// grows with the threads, bf16 ops keep rounded copies of their operands, and each kernel of a
// convolution has its own buffers. A kernel of another library (oneDNN) adds what only that
// library knows (its primitives' scratch): Op::library_memory(), which the launcher's memory
// model does not see (it plans with each node's default kernel; the rank counts the rest).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/precision.h"
#include "recipes/model/graph.h"

namespace dltune::engine {

struct OpMemory {
  int64_t saved_floats = 0;      // kept from forward to backward, for the batch asked
  int64_t workspace_floats = 0;  // the shared scratch of one pass, for the batch asked
};

// How the op computes: the rank's threads, the precision, and the node's kernel ("" or a name
// the op does not have: its default, Op::kernels().front()).
struct OpCompute {
  int threads = 1;
  Precision precision = Precision::kFp32;
  std::string kernel;
};

// The memory the CPU kernel of `node` (per-sample input shapes `in`, output `out`, already
// checked by the op table's shape rule) allocates for batches of up to `batch` samples when it
// computes as `c` says.
OpMemory op_memory(const recipes::Node& node, const std::vector<recipes::Shape>& in,
                   const recipes::Shape& out, int batch, const OpCompute& c = {});

// Attention's scratch per thread: dP (T, T) of one head, and in bf16 the head's rounded q, k, v
// and output gradient and three results (7 x T x hs).
int64_t attention_thread_floats(int64_t t, int64_t hs, Precision p);

// Layer norm's parameter gradients sum over rows cut into fixed blocks of about
// kLayerNormBlockFloats floats each (so that no sum depends on the thread count): the number of
// blocks for `rows` rows of `c` features.
inline constexpr int64_t kLayerNormBlockFloats = int64_t{1} << 14;
int64_t layer_norm_row_blocks(int64_t rows, int64_t c);

}  // namespace dltune::engine
