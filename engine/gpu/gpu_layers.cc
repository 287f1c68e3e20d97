// GPU ops on cuBLAS and the engine's kernels: linear, ReLU, dropout, flatten, pooling, LRN
// (conv2d is in gpu_conv.cc). Shapes as in the CPU twins (engine/ops/).
#include "engine/gpu/gpu_layers.h"

#include "engine/gpu/gpu_op.h"
#include "engine/gpu/kernels.h"

namespace dltune::engine::gpu {
namespace {

// y = x W^T + b with W (O, I) row-major as on the CPU, over R = B x rows-per-sample rows.
// cuBLAS is column-major: a row-major (R, C) matrix is the column-major (C, R) matrix, its
// transpose, so each row-major product below is computed as the transposed product in
// column-major terms.
class GpuLinear final : public GpuOp {
 public:
  using GpuOp::GpuOp;

  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    // in (R, I), W (O, I), b (O) -> out (R, O); column-major: out^T (O, R) = W (O, I) in^T
    const int O = static_cast<int>(attrs().out), I = features(), R = rows(batch);
    float beta = 0.0f;
    if (attrs().bias) {
      kernels::fill_rows(out, params_[1], R, O, stream());
      beta = 1.0f;
    }
    const float one = 1.0f;
    cublas_ok(ctx_,
              cublasSgemm(cublas_of(ctx_), CUBLAS_OP_T, CUBLAS_OP_N, O, R, I, &one, params_[0], I,
                          in[0], I, &beta, out, O),
              "linear forward");
  }

  void backward(const OpContext& ctx, const float* const* in, const float*, const float* dout,
                const GradOut* din, int batch) override {
    const int O = static_cast<int>(attrs().out), I = features(), R = rows(batch);
    const float one = 1.0f;
    const float wbeta = accumulate_grad(ctx, 0) ? 1.0f : 0.0f;
    // dW (O, I) = dout^T in; column-major: dW^T (I, O) = in^T (I, R) dout (R, O)
    cublas_ok(ctx_,
              cublasSgemm(cublas_of(ctx_), CUBLAS_OP_N, CUBLAS_OP_T, I, O, R, &one, in[0], I, dout,
                          O, &wbeta, grads_[0], I),
              "linear backward (weights)");
    if (attrs().bias) {
      if (accumulate_grad(ctx, 1)) {
        ctx_.fail(unsupported("GPU linear cannot add to a bias gradient yet"));
        return;
      }
      kernels::col_sum(dout, R, O, grads_[1], stream());
    }
    // din (R, I) = dout W; column-major: din^T (I, R) = W^T (I, O) dout^T (O, R)
    if (din[0].data) {
      const float beta = din[0].accumulate ? 1.0f : 0.0f;
      cublas_ok(ctx_,
                cublasSgemm(cublas_of(ctx_), CUBLAS_OP_N, CUBLAS_OP_N, I, R, O, &one, params_[0], I,
                            dout, O, &beta, din[0].data, I),
                "linear backward (input)");
    }
  }

 private:
  int features() const { return static_cast<int>(attrs().flatten ? in_numel() : in_[0].back()); }
  int rows(int batch) const { return static_cast<int>(batch * (in_numel() / features())); }
};

class GpuRelu final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    kernels::relu_forward(in[0], out, batch * in_numel(), stream());
  }
  void backward(const OpContext& ctx, const float* const*, const float* out, const float* dout,
                const GradOut* din, int batch) override {
    if (refuse_accumulate(ctx, din)) return;
    if (din[0].data) kernels::relu_backward(out, dout, din[0].data, batch * in_numel(), stream());
  }
};

class GpuFlatten final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    ctx_.device_copy(out, in[0], sizeof(float) * batch * in_numel());
  }
  void backward(const OpContext& ctx, const float* const*, const float*, const float* dout,
                const GradOut* din, int batch) override {
    if (refuse_accumulate(ctx, din)) return;
    if (din[0].data) ctx_.device_copy(din[0].data, dout, sizeof(float) * batch * in_numel());
  }
};

class GpuDropout final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void reserve(int max_batch) override {
    ensure(mask_, sizeof(float) * max_batch * in_numel(), "dropout mask");
  }
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override {
    const int64_t n = batch * in_numel();
    const auto p = static_cast<float>(attrs().p);
    mask_valid_ = ctx.training && p > 0.0f;
    if (!mask_valid_) {
      ctx_.device_copy(out, in[0], sizeof(float) * n);
      return;
    }
    if (!ensure(mask_, sizeof(float) * n, "dropout mask")) return;
    kernels::dropout_forward(in[0], out, mask_.floats(), n, ctx.seed, p, stream());
  }
  void backward(const OpContext& ctx, const float* const*, const float*, const float* dout,
                const GradOut* din, int batch) override {
    if (refuse_accumulate(ctx, din) || !din[0].data) return;
    const int64_t n = batch * in_numel();
    if (!mask_valid_) {
      ctx_.device_copy(din[0].data, dout, sizeof(float) * n);
      return;
    }
    kernels::multiply(dout, mask_.floats(), din[0].data, n, stream());
  }

 private:
  DeviceBuffer mask_;  // (B, S): 0 or 1/(1-p)
  bool mask_valid_ = false;
};

class GpuPool final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void reserve(int max_batch) override {
    if (node_.op == recipes::OpKind::kMaxPool)
      ensure(argmax_, sizeof(int32_t) * max_batch * out_numel(), "argmax buffer");
  }
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    // in (B, C, H, W) -> out (B, C, OH, OW)
    const kernels::PoolShape p = shape(batch);
    if (node_.op == recipes::OpKind::kAvgPool) {
      kernels::avgpool_forward(in[0], out, p, stream());
      return;
    }
    if (!ensure(argmax_, sizeof(int32_t) * batch * out_numel(), "argmax buffer")) return;
    kernels::maxpool_forward(in[0], out, argmax_.as<int32_t>(), p, stream());
  }
  void backward(const OpContext& ctx, const float* const*, const float*, const float* dout,
                const GradOut* din, int batch) override {
    if (refuse_accumulate(ctx, din) || !din[0].data) return;
    const kernels::PoolShape p = shape(batch);
    if (node_.op == recipes::OpKind::kAvgPool)
      kernels::avgpool_backward(dout, din[0].data, p, stream());
    else
      kernels::maxpool_backward(dout, argmax_.as<int32_t>(), din[0].data, p, stream());
  }

 private:
  kernels::PoolShape shape(int batch) const {
    const auto& a = attrs();
    return {static_cast<int>(batch * in_[0][0]), static_cast<int>(in_[0][1]),
            static_cast<int>(in_[0][2]),         static_cast<int>(out_[1]),
            static_cast<int>(out_[2]),           static_cast<int>(a.kernel),
            static_cast<int>(a.stride),          static_cast<int>(a.pad)};
  }
  DeviceBuffer argmax_;  // (B, C, OH, OW): index within the input plane
};

class GpuLrn final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void reserve(int max_batch) override {
    ensure(scale_, sizeof(float) * max_batch * in_numel(), "LRN scale");
  }
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    if (!ensure(scale_, sizeof(float) * batch * in_numel(), "LRN scale")) return;
    kernels::lrn_forward(in[0], out, scale_.floats(), shape(batch), stream());
  }
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override {
    if (refuse_accumulate(ctx, din)) return;
    if (din[0].data)
      kernels::lrn_backward(in[0], out, dout, scale_.floats(), din[0].data, shape(batch), stream());
  }

 private:
  kernels::LrnShape shape(int batch) const {
    const auto& a = attrs();
    return {batch,
            static_cast<int>(in_[0][0]),
            in_[0][1] * in_[0][2],
            static_cast<int>(a.size),
            static_cast<float>(a.alpha),
            static_cast<float>(a.beta),
            static_cast<float>(a.k)};
  }
  DeviceBuffer scale_;  // (B, C, H, W) saved by forward for backward
};

}  // namespace

Result<std::unique_ptr<Op>> make_gpu_op(const recipes::Node& node, GpuContext& ctx) {
  using K = recipes::OpKind;
  const auto& a = node.attrs;
  const bool pool = node.op == K::kMaxPool || node.op == K::kAvgPool;
  if (pool && (a.ceil_mode || !a.count_include_pad))
    return unsupported("GPU pooling has no ceil_mode / count_include_pad=false kernel yet");
  switch (node.op) {
    case K::kLinear:
      return std::unique_ptr<Op>(std::make_unique<GpuLinear>(ctx));
    case K::kConv2d:
      return make_gpu_conv2d(ctx);
    case K::kMaxPool:
    case K::kAvgPool:
      return std::unique_ptr<Op>(std::make_unique<GpuPool>(ctx));
    case K::kRelu:
      return std::unique_ptr<Op>(std::make_unique<GpuRelu>(ctx));
    case K::kDropout:
      return std::unique_ptr<Op>(std::make_unique<GpuDropout>(ctx));
    case K::kLrn:
      return std::unique_ptr<Op>(std::make_unique<GpuLrn>(ctx));
    case K::kFlatten:
      return std::unique_ptr<Op>(std::make_unique<GpuFlatten>(ctx));
    default:
      return unsupported("op " + std::string(recipes::op_name(node.op)) + " has no GPU kernel yet");
  }
}

}  // namespace dltune::engine::gpu
