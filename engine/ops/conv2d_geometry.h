// A 2-D convolution's shapes and everything that follows from them alone: which of the engine's
// kernels can run it (conv2d.h says why each), how its batches are cut into tasks for the rank's
// threads, and what each kernel allocates for a batch, threads and precision. Conv2d (the
// kernel, conv2d.h) derives from it, and op_memory() (op_memory.h) asks it without building a
// kernel: this file links no BLAS.
//
// The cuts (engine/core/parallel.h's rule: a function of the shapes and the batch, never of
// the thread count): forward and the input gradient run images_per_task() images per task; the
// weight gradient sums over images through dw_partials() partials (groups of consecutive
// tasks, their count bounded by kPartialBudgetFloats), added in order, or, for large weights
// when the whole batch's im2col columns are kept (dw_whole()), through one product over the
// batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/precision.h"
#include "engine/ops/conv3x3.h"
#include "engine/ops/conv_direct.h"
#include "engine/ops/conv_winograd.h"
#include "engine/ops/op_memory.h"
#include "recipes/model/graph.h"

namespace dltune::engine {

enum class Conv2dKind { kIm2col, kPointwise, kDirect, kDirect3x3, kWinograd, kOnednn };

// The kind a kernel name selects ("direct", "direct3x3", "winograd", "pointwise", "onednn";
// anything else: im2col).
Conv2dKind conv2d_kind(const std::string& kernel);

// (The fields are named as the members of the Conv2d that derives from it.)
class Conv2dGeometry {
 public:
  static constexpr int64_t kColsBudgetFloats = int64_t{1} << 20;       // 4 MiB of im2col columns
  static constexpr int64_t kSavedColsBudgetFloats = int64_t{1} << 23;  // 32 MiB per layer
  // Weight-gradient partials (one per group of image chunks) share at most this many floats.
  static constexpr int64_t kPartialBudgetFloats = int64_t{1} << 20;

  // `a` the node's attributes; `in` (C, H, W) and `out` (OC, OH, OW) per sample.
  void init(const recipes::OpAttrs& a, const recipes::Shape& in, const recipes::Shape& out);

  // The engine's own kernels for these shapes on this CPU, the default first: direct, then
  // direct3x3 where it wins (conv3x3_wins; DLTUNE_CONV3X3=0 keeps it off the default), then
  // pointwise, im2col, direct3x3 where it runs but does not win, and winograd (never the
  // default: measurement chooses it). (oneDNN's is Conv2d's to add: only the library can say
  // whether it has a kernel.)
  std::vector<std::string> own_kernels() const;

  int images_per_task(int batch) const;  // images of one forward / input-gradient task
  int tasks(int batch) const {
    return (batch + images_per_task(batch) - 1) / images_per_task(batch);
  }
  int64_t weight_floats() const { return int64_t{oc_} * kg_; }
  // im2col's per-thread scratch: cols (Kg, L) reused for their gradient, and tmp (OCg, L), for
  // one task's images.
  int64_t im2col_thread_floats(int batch) const {
    return int64_t{kg_ + ocg_} * images_per_task(batch) * hwo_;
  }
  // The columns an im2col layer keeps of a training batch of up to max_batch images (as many
  // whole images as fit kSavedColsBudgetFloats; 0 for the other kinds).
  int64_t saved_cols_capacity(Conv2dKind kind, int max_batch) const;
  bool dw_whole(Conv2dKind kind, int batch) const;
  int dw_partials(Conv2dKind kind, int batch) const;
  // The workspace before the per-thread parts: the weight-gradient partials, or (dw_whole) one
  // group's gathered output gradient.
  int64_t shared_floats(Conv2dKind kind, int batch) const;
  // bf16's workspace: the rounded input, the rounded output gradient, the input gradient before
  // rounding, and the weight and bias gradients before rounding (0 in fp32).
  int64_t bf16_workspace_floats(Precision p, int batch) const;

  // What kernel `kind` allocates for batches of up to `batch` on `threads` threads in `p`, beyond
  // a library's own scratch (kOnednn: only the bf16 copies).
  OpMemory memory(Conv2dKind kind, int batch, int threads, Precision p) const;

 protected:
  int oc_ = 0, k_ = 0, stride_ = 1, pad_ = 0, groups_ = 1;
  int c_ = 0, h_ = 0, w_ = 0, oh_ = 0, ow_ = 0;  // input and output planes
  int cg_ = 0, ocg_ = 0, kg_ = 0;                // channels per group in / out; rows of cols
  int64_t hwo_ = 0;                              // OH*OW
  bool can_direct_ = false, can_3x3_ = false, can_pointwise_ = false, can_winograd_ = false;
  Conv3x3Shape c3_;               // when can_3x3_
  WinogradShape wino_;            // when can_winograd_
  DirectConvShape direct_shape_;  // when can_direct_

 private:
  // The kernel's scratch for exactly `batch` images (the chunking is not monotonic in it).
  int64_t workspace_at(Conv2dKind kind, int batch, int threads) const;
};

}  // namespace dltune::engine
