// GPU ops on cuBLAS and the engine's kernels: linear, ReLU, GELU, dropout, flatten, pooling
// (max, average, adaptive average), LRN, and make_gpu_op, which picks every op kind's twin
// (conv2d is in gpu_conv.cc, the graph ops in gpu_graph_ops.cc, gpu_norm.cc and
// gpu_attention.cc). Shapes as in the CPU twins (engine/ops/).
#include "engine/gpu/gpu_layers.h"

#include "engine/gpu/gpu_op.h"
#include "engine/gpu/kernels.h"

namespace dltune::engine::gpu {
namespace {

// y = x W^T + b with W (O, I) row-major as on the CPU, over R = B x rows-per-sample rows (the
// products: gemm_plan.h). The weight may be another node's (tie): its gradient is then added
// per accumulate_grad. The bias gradient is dout's column sums, a product with a ones vector.
class GpuLinear final : public GpuOp {
 public:
  using GpuOp::GpuOp;

  void reserve(int max_batch) override {
    if (!attrs().bias) return;
    const int64_t rows = int64_t{max_batch} * rows_per_sample();
    if (rows <= ones_rows_) return;
    if (!ensure(ones_, sizeof(float) * static_cast<size_t>(rows), "ones vector")) return;
    kernels::fill(ones_.floats(), 1.0f, rows, stream());
    ones_rows_ = rows;
  }

  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    // in (R, I), W (O, I), b (O) -> out (R, O)
    const int O = static_cast<int>(attrs().out), I = features(), R = rows(batch);
    float beta = 0.0f;
    if (attrs().bias) {
      kernels::fill_rows(out, params_[1], R, O, stream());
      beta = 1.0f;
    }
    gemm(linear_forward(in[0], params_[0], out, R, I, O, beta), "linear forward");
  }

  void backward(const OpContext& ctx, const float* const* in, const float*, const float* dout,
                const GradOut* din, int batch) override {
    const int O = static_cast<int>(attrs().out), I = features(), R = rows(batch);
    gemm(linear_weight_grad(in[0], dout, grads_[0], R, I, O, accumulate_grad(ctx, 0) ? 1.0f : 0.0f),
         "linear backward (weights)");
    if (attrs().bias) {
      reserve(batch);  // the ones vector covers R rows (a no-op after reserve(max_batch))
      if (ones_rows_ < R) return;
      gemm(linear_bias_grad(dout, ones_.floats(), grads_[1], R, O,
                            accumulate_grad(ctx, 1) ? 1.0f : 0.0f),
           "linear backward (bias)");
    }
    if (din[0].data)
      gemm(linear_input_grad(dout, params_[0], din[0].data, R, I, O,
                             din[0].accumulate ? 1.0f : 0.0f),
           "linear backward (input)");
  }

 private:
  int features() const { return static_cast<int>(attrs().flatten ? in_numel() : in_[0].back()); }
  int64_t rows_per_sample() const { return in_numel() / features(); }
  int rows(int batch) const { return static_cast<int>(batch * rows_per_sample()); }

  DeviceBuffer ones_;  // (R) of 1.0f for the bias gradient
  int64_t ones_rows_ = 0;
};

class GpuRelu final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    kernels::relu_forward(in[0], out, batch * in_numel(), stream());
  }
  void backward(const OpContext&, const float* const*, const float* out, const float* dout,
                const GradOut* din, int batch) override {
    if (din[0].data)
      kernels::relu_backward(out, dout, din[0].data, batch * in_numel(), din[0].accumulate,
                             stream());
  }
};

class GpuGelu final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    kernels::gelu_forward(in[0], out, batch * in_numel(), stream());
  }
  void backward(const OpContext&, const float* const* in, const float*, const float* dout,
                const GradOut* din, int batch) override {
    if (din[0].data)
      kernels::gelu_backward(in[0], dout, din[0].data, batch * in_numel(), din[0].accumulate,
                             stream());
  }
};

class GpuFlatten final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    ctx_.device_copy(out, in[0], sizeof(float) * batch * in_numel());
  }
  void backward(const OpContext&, const float* const*, const float*, const float* dout,
                const GradOut* din, int batch) override {
    if (din[0].data)
      kernels::store_grad(din[0].data, dout, batch * in_numel(), din[0].accumulate, stream());
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
  void backward(const OpContext&, const float* const*, const float*, const float* dout,
                const GradOut* din, int batch) override {
    if (!din[0].data) return;
    const int64_t n = batch * in_numel();
    if (!mask_valid_) {
      kernels::store_grad(din[0].data, dout, n, din[0].accumulate, stream());
      return;
    }
    kernels::dropout_backward(dout, mask_.floats(), din[0].data, n, din[0].accumulate, stream());
  }

 private:
  DeviceBuffer mask_;  // (B, S): 0 or 1/(1-p)
  bool mask_valid_ = false;
};

// max_pool, avg_pool (ceil_mode, count_include_pad) and adaptive_avgpool: engine/ops/pool.h.
class GpuPool final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void reserve(int max_batch) override {
    if (node_.op == recipes::OpKind::kMaxPool)
      ensure(argmax_, sizeof(int32_t) * max_batch * out_numel(), "argmax buffer");
  }
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    // in (B, C, H, W) -> out (B, C, OH, OW)
    const math::PoolShape p = shape(batch);
    if (p.mode == math::PoolMode::kMax &&
        !ensure(argmax_, sizeof(int32_t) * batch * out_numel(), "argmax buffer"))
      return;
    kernels::pool_forward(in[0], out, argmax_.as<int32_t>(), p, stream());
  }
  void backward(const OpContext&, const float* const*, const float*, const float* dout,
                const GradOut* din, int batch) override {
    if (din[0].data)
      kernels::pool_backward(dout, argmax_.as<int32_t>(), din[0].data, shape(batch),
                             din[0].accumulate, stream());
  }

 private:
  math::PoolShape shape(int batch) const {
    const auto& a = attrs();
    math::PoolShape p;
    p.planes = static_cast<int>(batch * in_[0][0]);
    p.h = static_cast<int>(in_[0][1]);
    p.w = static_cast<int>(in_[0][2]);
    p.oh = static_cast<int>(out_[1]);
    p.ow = static_cast<int>(out_[2]);
    p.k = static_cast<int>(a.kernel);
    p.stride = static_cast<int>(a.stride);
    p.pad = static_cast<int>(a.pad);
    p.mode = node_.op == recipes::OpKind::kMaxPool   ? math::PoolMode::kMax
             : node_.op == recipes::OpKind::kAvgPool ? math::PoolMode::kAvg
                                                     : math::PoolMode::kAdaptiveAvg;
    p.count_include_pad = a.count_include_pad;
    return p;
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
  void backward(const OpContext&, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override {
    if (din[0].data)
      kernels::lrn_backward(in[0], out, dout, scale_.floats(), din[0].data, shape(batch),
                            din[0].accumulate, stream());
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

// No default case: -Wswitch (an error under the project's -Werror) names any op kind the table
// gains without a GPU twin here.
Result<std::unique_ptr<Op>> make_gpu_op(const recipes::Node& node, GpuContext& ctx) {
  using K = recipes::OpKind;
  auto op = [&]() -> std::unique_ptr<Op> {
    switch (node.op) {
      case K::kLinear:
        return std::make_unique<GpuLinear>(ctx);
      case K::kConv2d:
        return make_gpu_conv2d(ctx);
      case K::kMaxPool:
      case K::kAvgPool:
      case K::kAdaptiveAvgPool:
        return std::make_unique<GpuPool>(ctx);
      case K::kRelu:
        return std::make_unique<GpuRelu>(ctx);
      case K::kGelu:
        return std::make_unique<GpuGelu>(ctx);
      case K::kDropout:
        return std::make_unique<GpuDropout>(ctx);
      case K::kLrn:
        return std::make_unique<GpuLrn>(ctx);
      case K::kFlatten:
        return std::make_unique<GpuFlatten>(ctx);
      case K::kBatchNorm:
        return make_gpu_batchnorm(ctx);
      case K::kLayerNorm:
        return make_gpu_layernorm(ctx);
      case K::kAdd:
        return make_gpu_add(ctx);
      case K::kConcat:
        return make_gpu_concat(ctx);
      case K::kPadChannels:
        return make_gpu_pad_channels(ctx);
      case K::kEmbedding:
        return make_gpu_embedding(ctx);
      case K::kPositionEmbedding:
        return make_gpu_position(ctx);
      case K::kAttention:
        return make_gpu_attention(ctx);
    }
    return nullptr;
  }();
  if (!op)
    return unsupported("op " + std::string(recipes::op_name(node.op)) + " has no GPU kernel");
  return op;
}

}  // namespace dltune::engine::gpu
