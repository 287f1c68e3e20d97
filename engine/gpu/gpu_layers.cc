// GPU layers on cuBLAS and the engine's kernels: linear, ReLU, dropout, flatten, pooling, LRN
// (conv2d is in gpu_conv.cc). Shapes as in the CPU twins (engine/layers.h, pool.h, lrn.h).
#include "engine/gpu/gpu_layers.h"

#include "engine/gpu/gpu_layer_base.h"
#include "engine/gpu/kernels.h"

namespace dltune::engine::gpu {
namespace {

// y = x W^T + b with W (O, I) row-major as on the CPU. cuBLAS is column-major: a row-major
// (R, C) matrix is the column-major (C, R) matrix, its transpose, so each row-major product
// below is computed as the transposed product in column-major terms.
class GpuLinear final : public GpuLayer {
 public:
  using GpuLayer::GpuLayer;

  void forward(const LayerContext&, const float* in, float* out, int batch) override {
    // in (B, I), W (O, I), b (O) -> out (B, O); column-major: out^T (O, B) = W (O, I) in^T
    const int O = out_.c, I = static_cast<int>(in_.size());
    const float* b = params_ + int64_t{O} * I;
    kernels::fill_rows(out, b, batch, O, stream());
    const float one = 1.0f;
    cublas_ok(ctx_,
              cublasSgemm(cublas_of(ctx_), CUBLAS_OP_T, CUBLAS_OP_N, O, batch, I, &one, params_, I,
                          in, I, &one, out, O),
              "linear forward");
  }

  void backward(const LayerContext&, const float* in, const float*, const float* dout, float* din,
                int batch) override {
    const int O = out_.c, I = static_cast<int>(in_.size());
    const float one = 1.0f, zero = 0.0f;
    // dW (O, I) = dout^T in; column-major: dW^T (I, O) = in^T (I, B) dout (B, O)
    cublas_ok(ctx_,
              cublasSgemm(cublas_of(ctx_), CUBLAS_OP_N, CUBLAS_OP_T, I, O, batch, &one, in, I, dout,
                          O, &zero, grads_, I),
              "linear backward (weights)");
    kernels::col_sum(dout, batch, O, grads_ + int64_t{O} * I, stream());
    // din (B, I) = dout W; column-major: din^T (I, B) = W^T (I, O) dout^T (O, B)
    if (din)
      cublas_ok(ctx_,
                cublasSgemm(cublas_of(ctx_), CUBLAS_OP_N, CUBLAS_OP_N, I, batch, O, &one, params_,
                            I, dout, O, &zero, din, I),
                "linear backward (input)");
  }
};

class GpuRelu final : public GpuLayer {
 public:
  using GpuLayer::GpuLayer;
  void forward(const LayerContext&, const float* in, float* out, int batch) override {
    kernels::relu_forward(in, out, batch * in_.size(), stream());
  }
  void backward(const LayerContext&, const float*, const float* out, const float* dout, float* din,
                int batch) override {
    if (din) kernels::relu_backward(out, dout, din, batch * in_.size(), stream());
  }
};

class GpuFlatten final : public GpuLayer {
 public:
  using GpuLayer::GpuLayer;
  void forward(const LayerContext&, const float* in, float* out, int batch) override {
    ctx_.device_copy(out, in, sizeof(float) * batch * in_.size());
  }
  void backward(const LayerContext&, const float*, const float*, const float* dout, float* din,
                int batch) override {
    if (din) ctx_.device_copy(din, dout, sizeof(float) * batch * in_.size());
  }
};

class GpuDropout final : public GpuLayer {
 public:
  using GpuLayer::GpuLayer;
  void reserve(int max_batch) override {
    ensure(mask_, sizeof(float) * max_batch * in_.size(), "dropout mask");
  }
  void forward(const LayerContext& ctx, const float* in, float* out, int batch) override {
    const int64_t n = batch * in_.size();
    mask_valid_ = ctx.training && spec_.p > 0.0f;
    if (!mask_valid_) {
      ctx_.device_copy(out, in, sizeof(float) * n);
      return;
    }
    if (!ensure(mask_, sizeof(float) * n, "dropout mask")) return;
    kernels::dropout_forward(in, out, mask_.floats(), n, ctx.seed, spec_.p, stream());
  }
  void backward(const LayerContext&, const float*, const float*, const float* dout, float* din,
                int batch) override {
    if (!din) return;
    const int64_t n = batch * in_.size();
    if (!mask_valid_) {
      ctx_.device_copy(din, dout, sizeof(float) * n);
      return;
    }
    kernels::multiply(dout, mask_.floats(), din, n, stream());
  }

 private:
  DeviceBuffer mask_;  // (B, C*H*W): 0 or 1/(1-p)
  bool mask_valid_ = false;
};

class GpuPool final : public GpuLayer {
 public:
  using GpuLayer::GpuLayer;
  void reserve(int max_batch) override {
    if (spec_.kind == LayerSpec::Kind::kMaxPool)
      ensure(argmax_, sizeof(int32_t) * max_batch * out_.size(), "argmax buffer");
  }
  void forward(const LayerContext&, const float* in, float* out, int batch) override {
    // in (B, C, H, W) -> out (B, C, OH, OW)
    const kernels::PoolShape p = shape(batch);
    if (spec_.kind == LayerSpec::Kind::kAvgPool) {
      kernels::avgpool_forward(in, out, p, stream());
      return;
    }
    if (!ensure(argmax_, sizeof(int32_t) * batch * out_.size(), "argmax buffer")) return;
    kernels::maxpool_forward(in, out, argmax_.as<int32_t>(), p, stream());
  }
  void backward(const LayerContext&, const float*, const float*, const float* dout, float* din,
                int batch) override {
    if (!din) return;
    const kernels::PoolShape p = shape(batch);
    if (spec_.kind == LayerSpec::Kind::kAvgPool)
      kernels::avgpool_backward(dout, din, p, stream());
    else
      kernels::maxpool_backward(dout, argmax_.as<int32_t>(), din, p, stream());
  }

 private:
  kernels::PoolShape shape(int batch) const {
    return {batch * in_.c, in_.h, in_.w, out_.h, out_.w, spec_.kernel, spec_.stride, spec_.pad};
  }
  DeviceBuffer argmax_;  // (B, C, OH, OW): index within the input plane
};

class GpuLrn final : public GpuLayer {
 public:
  using GpuLayer::GpuLayer;
  void reserve(int max_batch) override {
    ensure(scale_, sizeof(float) * max_batch * in_.size(), "LRN scale");
  }
  void forward(const LayerContext&, const float* in, float* out, int batch) override {
    if (!ensure(scale_, sizeof(float) * batch * in_.size(), "LRN scale")) return;
    kernels::lrn_forward(in, out, scale_.floats(), shape(batch), stream());
  }
  void backward(const LayerContext&, const float* in, const float* out, const float* dout,
                float* din, int batch) override {
    if (din) kernels::lrn_backward(in, out, dout, scale_.floats(), din, shape(batch), stream());
  }

 private:
  kernels::LrnShape shape(int batch) const {
    return {batch, in_.c, int64_t{in_.h} * in_.w, spec_.lrn_size, spec_.alpha, spec_.beta, spec_.k};
  }
  DeviceBuffer scale_;  // (B, C, H, W) saved by forward for backward
};

}  // namespace

Result<std::unique_ptr<Layer>> make_gpu_layer(const LayerSpec& spec, GpuContext& ctx) {
  using K = LayerSpec::Kind;
  switch (spec.kind) {
    case K::kLinear:
      return std::unique_ptr<Layer>(std::make_unique<GpuLinear>(spec, ctx));
    case K::kConv2d:
      return make_gpu_conv2d(spec, ctx);
    case K::kMaxPool:
    case K::kAvgPool:
      return std::unique_ptr<Layer>(std::make_unique<GpuPool>(spec, ctx));
    case K::kRelu:
      return std::unique_ptr<Layer>(std::make_unique<GpuRelu>(spec, ctx));
    case K::kDropout:
      return std::unique_ptr<Layer>(std::make_unique<GpuDropout>(spec, ctx));
    case K::kLrn:
      return std::unique_ptr<Layer>(std::make_unique<GpuLrn>(spec, ctx));
    case K::kFlatten:
      return std::unique_ptr<Layer>(std::make_unique<GpuFlatten>(spec, ctx));
  }
  return invalid_input(std::string("no GPU layer for kind '") + layer_kind_name(spec.kind) + "'");
}

}  // namespace dltune::engine::gpu
