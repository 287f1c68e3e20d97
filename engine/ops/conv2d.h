// 2-D convolution with stride, zero padding and groups (Caffe / PyTorch semantics).
//
// Parameters: W (OC, C/groups, K, K) then, with `bias`, b (OC), PyTorch's layout.
//
// Kernels (Op::kernels(); the first applicable one in this order is the default, and
// engine/graph/kernel_select.h can pick another by measurement):
//   direct     one input channel, stride 1 (LeNet's first layer; engine/ops/conv_direct.h): no
//              columns, no GEMM.
//   direct3x3  3x3, stride 1 or 2, padding 1, one group (the CIFAR ResNets' layers;
//              engine/ops/conv3x3.h), on a CPU with AVX-512 or AVX2; the default where it wins
//              (conv3x3_wins: up to 64 channels, planes within 2 MiB).
//   winograd   3x3, stride 1, padding 1, one group, even planes, channels in multiples of 4
//              (engine/ops/conv_winograd.h: F(2x2, 3x3), 4/9 of the multiply-adds), on a CPU
//              with AVX2 + FMA; never the default, chosen by measurement where it wins.
//   pointwise  1x1, stride 1, no padding, one group: the input planes are the columns, one GEMM
//              per image (a ResNet-50 bottleneck's 1x1 layers).
//   im2col     any shape: batched im2col + one OpenBLAS sgemm per group over a chunk of images:
//              cols (Kg, nb*OH*OW) with Kg = (C/groups)*K*K, so each GEMM has N = nb*OH*OW.
//              When a training batch's columns fit in kSavedColsBudgetFloats, forward builds
//              them for the whole batch in a buffer of the layer's own and backward reuses them
//              instead of running im2col again.
//   onednn     oneDNN's convolution primitives (engine/ops/onednn.h), where the build has
//              oneDNN.
//
// Threads (engine/core/parallel.h's rule): the cuts of conv2d_geometry.h, fixed by the shapes;
// forward and the input gradient write each chunk's images; the weight gradient sums partials
// in order (or one product over the batch); the bias gradient sums each channel over the batch
// in order. So no result depends on the thread count. What each kernel allocates is
// conv2d_geometry.h's (op_memory()), oneDNN's own scratch library_memory().
#pragma once

#include <memory>

#include "engine/core/tensor.h"
#include "engine/ops/conv2d_geometry.h"
#include "engine/ops/onednn.h"
#include "engine/ops/op.h"

namespace dltune::engine {

class Conv2d final : public Op, private Conv2dGeometry {
 public:
  Conv2d();
  ~Conv2d() override;
  std::vector<std::string> kernels() const override;
  void reserve(int max_batch) override;
  void release() override;
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;

 protected:
  Status configure() override;
  void use_kernel(const std::string& name) override;
  OpMemory library_memory(int batch) const override;

 private:
  using Kind = Conv2dKind;

  // ---- the cuts, for this node's kernel (conv2d_geometry.h) ----
  int dw_partials(int batch) const { return Conv2dGeometry::dw_partials(kind_, batch); }
  bool dw_whole(int batch) const { return Conv2dGeometry::dw_whole(kind_, batch); }
  int64_t shared_floats(int batch) const { return Conv2dGeometry::shared_floats(kind_, batch); }
  // Whether forward keeps the columns of a training batch of `batch` images for backward.
  bool saves_cols(int batch) const {
    return kind_ == Kind::kIm2col &&
           int64_t{groups_} * kg_ * hwo_ * batch <= static_cast<int64_t>(saved_cols_.size());
  }

  // ---- im2col + GEMM (conv2d.cc) ----
  // cols (Kg, nb*OH*OW, row stride ldc) <- images [n0, n0+nb) of `in`, channels of group g.
  void im2col(const float* in, int n0, int nb, int g, float* cols, int64_t ldc) const;
  // din (images [n0, n0+nb), channels of group g) += col2im(cols (Kg, nb*OH*OW)).
  void col2im(const float* cols, int n0, int nb, int g, float* din) const;
  void forward_chunk(const float* in, float* out, int n0, int nb, bool save, int batch,
                     float* scratch);
  void backward_chunk(const float* in, const float* dout, float* din, bool din_acc, int n0, int nb,
                      bool saved, int batch, float* dw, bool dw_acc, float* scratch) const;
  void forward_im2col(const OpContext& ctx, const float* in, float* out, int batch);
  void backward_im2col(const OpContext& ctx, const float* in, const float* dout, float* din,
                       bool din_acc, int batch);
  void backward_whole_dw(const OpContext& ctx, const float* dout, int batch, float* gather);

  // ---- the other kernels (conv2d_paths.cc) ----
  void forward_3x3(const OpContext& ctx, const float* in, float* out, int batch);
  void backward_3x3(const OpContext& ctx, const float* in, const float* dout, float* din,
                    bool din_acc, int batch);
  void forward_winograd(const OpContext& ctx, const float* in, float* out, int batch);
  void backward_winograd(const OpContext& ctx, const float* in, const float* dout, float* din,
                         bool din_acc, int batch);
  void forward_pointwise(const OpContext& ctx, const float* in, float* out, int batch);
  void backward_pointwise(const OpContext& ctx, const float* in, const float* dout, float* din,
                          bool din_acc, int batch);
  void forward_direct(const OpContext& ctx, const float* in, float* out, int batch);
  void backward_direct(const OpContext& ctx, const float* in, const float* dout, float* din,
                       bool din_acc, int batch);
  void backward_bias(const OpContext& ctx, const float* dout, int batch);
  // dw (OC, Kg) (+)= the partials (count of them, weight_floats() apart) in order.
  void reduce_partials(const OpContext& ctx, const float* partials, int count, bool accumulate);
  // The kernels in fp32 on this call's operands (w_, b_, dw_).
  void forward_fp32(const OpContext& ctx, const float* in, float* out, int batch);
  void backward_fp32(const OpContext& ctx, const float* in, const float* dout, float* din,
                     bool din_acc, int batch);
  // bf16 (engine/core/precision.h): rounded copies of the operands, the fp32 kernels on them,
  // the results rounded as autocast's bf16 convolution returns them.
  void forward_bf16(const OpContext& ctx, const float* in, float* out, int batch);
  void backward_bf16(const OpContext& ctx, const float* in, const float* dout, const GradOut& din,
                     int batch);
  // Where the bf16 copies start in the workspace: after the kernel's own part (this op's
  // geometry asked directly: op_memory() would derive it and the kernel list again per call).
  int64_t kernel_workspace_floats(int batch) const {
    return memory(kind_, batch, threads_, precision_).workspace_floats -
           bf16_workspace_floats(precision_, batch) + library_memory(batch).workspace_floats;
  }
  OnednnConvShape onednn_shape() const;

  Kind kind_ = Kind::kIm2col;
  Buffer c3_packed_;                 // Conv3x3Shape::packed_floats()
  Buffer c3_in_, c3_dout_;           // per thread: padded planes of a group of images
  Buffer c3_scratch_;                // per thread: the stride-2 input gradient's phases
  Buffer wino_packed_;               // WinogradShape::packed_floats()
  Buffer direct_scratch_;            // per thread: DirectConvShape::scratch_floats()
  Buffer saved_cols_;                // (groups, Kg, B*OH*OW) of the last training forward
  const float* saved_in_ = nullptr;  // the input those columns came from (nullptr: none)
  int saved_batch_ = 0;
  // This call's operands: the parameters, or their bf16-rounded copies (bf16_w_: W then b), and
  // where the weight and bias gradients go (grads_, or bf16 scratch) and whether they add.
  const float* wts_ = nullptr;
  const float* b_ = nullptr;
  float* dw_ = nullptr;
  float* db_ = nullptr;
  bool dw_acc_ = false, db_acc_ = false;
  Buffer bf16_w_;
  std::unique_ptr<OnednnConv> onednn_;
};

}  // namespace dltune::engine
