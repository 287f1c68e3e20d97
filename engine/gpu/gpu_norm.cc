// The GPU twins of batch norm and layer norm (engine/ops/norm.h), on the engine's own kernels
// (kernels_norm.cu), FP32 tensors with double per-channel sums.
//
// Batch norm's running statistics and num_batches_tracked are the node's state tensors, bound
// to the GpuModel's device state buffer (state_[0] running_mean (C), state_[1] running_var (C),
// state_[2] the counter, a float as on the CPU): training updates them on the device, and a
// checkpoint copies them to the host like the parameters.
#include "engine/gpu/gpu_op.h"
#include "engine/gpu/kernels.h"

namespace dltune::engine::gpu {
namespace {

class GpuBatchNorm final : public GpuOp {
 public:
  using GpuOp::GpuOp;

  void reserve(int) override { buffers(); }

  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override {
    // in (B, C, S) -> out (B, C, S)
    if (!buffers()) return;
    training_ = ctx.training;
    kernels::batchnorm_forward(in[0], out, params_[0], params_[1], state_[0], state_[1], state_[2],
                               mean(), invstd(), partials_.as<double>(), shape(batch), training_,
                               stream());
  }

  void backward(const OpContext& ctx, const float* const* in, const float*, const float* dout,
                const GradOut* din, int batch) override {
    if (!buffers()) return;
    kernels::batchnorm_backward(in[0], dout, din[0].data, params_[0], mean(), invstd(), grads_[0],
                                grads_[1], coefs(), partials_.as<double>(), shape(batch), training_,
                                accumulate_grad(ctx, 0), accumulate_grad(ctx, 1), din[0].accumulate,
                                stream());
  }

 protected:
  Status configure() override {
    c_ = static_cast<int>(in_[0][0]);
    s_ = in_numel() / c_;
    return ok_status();
  }

 private:
  bool buffers() {
    return ensure(partials_, sizeof(double) * kernels::bn_partial_doubles(c_), "partial sums") &&
           ensure(stats_, sizeof(float) * 5 * static_cast<size_t>(c_), "statistics");
  }
  kernels::BnShape shape(int batch) const {
    kernels::BnShape sh;
    sh.batch = batch;
    sh.c = c_;
    sh.s = s_;
    sh.eps = attrs().eps;
    sh.momentum = attrs().momentum;
    return sh;
  }
  float* mean() const { return stats_.floats(); }
  float* invstd() const { return stats_.floats() + c_; }
  float* coefs() const { return stats_.floats() + 2 * c_; }

  int c_ = 0;
  int64_t s_ = 1;
  DeviceBuffer partials_;  // (C, parts, 2) doubles
  DeviceBuffer stats_;     // mean (C), invstd (C) of the last forward; backward's coefs (3 C)
  bool training_ = true;   // the mode of the last forward
};

class GpuLayerNorm final : public GpuOp {
 public:
  using GpuOp::GpuOp;

  void reserve(int max_batch) override { buffers(int64_t{max_batch} * rows_); }

  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    // in (R, C) -> out (R, C), R = B x rows per sample
    const int64_t R = batch * rows_;
    if (!buffers(R)) return;
    kernels::layernorm_forward(in[0], out, params_[0], params_[1], mean_.floats(), rstd_.floats(),
                               R, c_, static_cast<float>(attrs().eps), stream());
  }

  void backward(const OpContext& ctx, const float* const* in, const float*, const float* dout,
                const GradOut* din, int batch) override {
    const int64_t R = batch * rows_;
    if (!buffers(R)) return;
    kernels::layernorm_backward(in[0], dout, din[0].data, params_[0], mean_.floats(),
                                rstd_.floats(), grads_[0], grads_[1], partials_.floats(), R, c_,
                                accumulate_grad(ctx, 0), accumulate_grad(ctx, 1), din[0].accumulate,
                                stream());
  }

 protected:
  Status configure() override {
    c_ = static_cast<int>(in_[0].back());
    rows_ = in_numel() / c_;
    return ok_status();
  }

 private:
  bool buffers(int64_t rows) {
    const auto r = static_cast<size_t>(rows);
    return ensure(mean_, sizeof(float) * r, "row means") &&
           ensure(rstd_, sizeof(float) * r, "row deviations") &&
           ensure(partials_, sizeof(float) * kernels::ln_partial_floats(rows, c_), "partial sums");
  }

  int c_ = 0;
  int64_t rows_ = 1;          // rows per sample
  DeviceBuffer mean_, rstd_;  // (B x rows) of the last forward
  DeviceBuffer partials_;     // (parts, C) twice
};

}  // namespace

std::unique_ptr<Op> make_gpu_batchnorm(GpuContext& ctx) {
  return std::make_unique<GpuBatchNorm>(ctx);
}
std::unique_ptr<Op> make_gpu_layernorm(GpuContext& ctx) {
  return std::make_unique<GpuLayerNorm>(ctx);
}

}  // namespace dltune::engine::gpu
