// 2-D convolution with stride, zero padding and groups (Caffe / PyTorch semantics).
//
// Parameters: W (OC, C/groups, K, K) then, with `bias`, b (OC), PyTorch's layout.
// Algorithm: batched im2col + one OpenBLAS sgemm per group over a chunk of images:
//   cols (Kg, nb*OH*OW) with Kg = (C/groups)*K*K, one column per output pixel of every image
//   of the chunk, so each gemm has N = nb*OH*OW (large, efficient) instead of OH*OW.
// The chunk size nb keeps cols within a fixed budget (kColsBudgetFloats, op_memory.h) so
// AlexNet-sized layers do not need gigabytes of scratch. When a training batch's columns fit in
// kSavedColsBudgetFloats, forward builds them for the whole batch in a buffer of the layer's own
// and backward reuses them instead of running im2col again (im2col was a fifth of a LeNet-5 step,
// half of it repeated in backward). A 1x1 convolution with stride 1 and no padding needs no columns
// at all: the input planes are the columns, so each image is one GEMM straight on the input (a
// ResNet-50 bottleneck's 1x1 layers). A convolution of a single input channel with stride 1
// (LeNet's first layer) is computed directly instead (engine/ops/conv_direct.h): no columns, no
// GEMM. So is a 3x3 convolution with stride 1 or 2 and padding 1 on a CPU with AVX-512
// (engine/ops/conv3x3.h): the CIFAR ResNets' layers, where im2col's copies cost more than the
// GEMMs.
#pragma once

#include "engine/core/tensor.h"
#include "engine/ops/conv3x3.h"
#include "engine/ops/conv_direct.h"
#include "engine/ops/op.h"
#include "engine/ops/op_memory.h"

namespace dltune::engine {

class Conv2d final : public Op {
 public:
  void reserve(int max_batch) override;
  void release() override {
    direct_scratch_.resize(0);
    c3_packed_.resize(0);
    c3_in_.resize(0);
    c3_dout_.resize(0);
    c3_scratch_.resize(0);
    saved_cols_.resize(0);
    din_tmp_.resize(0);
    saved_in_ = nullptr;
  }
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;

 protected:
  Status configure() override;

 private:
  int chunk(int batch) const;  // images per im2col chunk
  // Whether forward keeps the columns of a training batch of `batch` images for backward.
  bool saves_cols(int batch) const {
    return !pointwise_ && !conv3x3_ &&
           int64_t{groups_} * kg_ * hwo_ * batch <= static_cast<int64_t>(saved_cols_.size());
  }
  // cols (Kg, nb*OH*OW) <- images [n0, n0+nb) of `in`, channels of group g.
  void im2col(const float* in, int n0, int nb, int g, float* cols) const;
  // din (images [n0, n0+nb), channels of group g) += col2im(cols).
  void col2im(const float* cols, int n0, int nb, int g, float* din) const;

  void backward_gemm(const OpContext& ctx, const float* in, const float* dout, float* din,
                     bool din_acc, int batch);
  void forward_3x3(const float* in, float* out, int batch);
  void backward_3x3(const OpContext& ctx, const float* in, const float* dout, float* din,
                    bool din_acc, int batch);
  void forward_pointwise(const float* in, float* out, int batch);
  void backward_pointwise(const OpContext& ctx, const float* in, const float* dout, float* din,
                          bool din_acc, int batch);
  void forward_direct(const float* in, float* out, int batch);
  void backward_direct(const OpContext& ctx, const float* in, const float* dout, float* din,
                       int batch);
  const float* bias() const { return attrs().bias ? params_[1] : nullptr; }

  int oc_ = 0, k_ = 0, stride_ = 1, pad_ = 0, groups_ = 1;
  int c_ = 0, h_ = 0, w_ = 0, oh_ = 0, ow_ = 0;  // input and output planes
  bool direct_ = false;              // one input channel, stride 1: engine/ops/conv_direct.h
  bool pointwise_ = false;           // 1x1, stride 1, no padding, one group: no columns
  bool conv3x3_ = false;             // 3x3, stride 1 or 2, padding 1: engine/ops/conv3x3.h
  Conv3x3Shape c3_;                  // when conv3x3_
  Buffer c3_packed_;                 // Conv3x3Shape::packed_floats()
  Buffer c3_in_, c3_dout_;           // padded planes of a group of images
  Buffer c3_scratch_;                // the stride-2 input gradient's phases (one image)
  DirectConvShape direct_shape_;     // when direct_
  Buffer direct_scratch_;            // when direct_: DirectConvShape::scratch_floats()
  Buffer din_tmp_;                   // direct_ with an accumulated input gradient
  int cg_ = 0, ocg_ = 0, kg_ = 0;    // channels per group in / out; rows of cols
  int64_t hwo_ = 0;                  // OH*OW
  Buffer saved_cols_;                // (groups, Kg, B*OH*OW) of the last training forward
  const float* saved_in_ = nullptr;  // the input those columns came from (nullptr: none)
  int saved_batch_ = 0;
};

}  // namespace dltune::engine
