// The GPU twins of the graph ops that join, pad or look up tensors: add (N inputs), concat
// (channels), pad_channels, embedding and position_embedding (engine/ops/combine.h and
// embedding.h give the shapes and semantics).
#include <climits>

#include "engine/gpu/gpu_op.h"
#include "engine/gpu/kernels.h"

namespace dltune::engine::gpu {
namespace {

// out = in[0] + in[1] + ... (in that order, as the CPU adds); din[k] (+)= dout.
class GpuAdd final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    const int64_t n = batch * out_numel();
    kernels::add2(in[0], in[1], out, n, stream());
    for (size_t k = 2; k < in_.size(); ++k) kernels::add_to(out, in[k], n, stream());
  }
  void backward(const OpContext&, const float* const*, const float*, const float* dout,
                const GradOut* din, int batch) override {
    const int64_t n = batch * out_numel();
    for (size_t k = 0; k < in_.size(); ++k)
      if (din[k].data) kernels::store_grad(din[k].data, dout, n, din[k].accumulate, stream());
  }
};

// in[k] (B, C_k, S) -> out (B, sum C_k, S): per sample, the inputs' blocks one after another.
class GpuConcat final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    int64_t offset = 0;
    for (size_t k = 0; k < in_.size(); ++k) {
      const int64_t per_in = in_numel(k);
      kernels::copy_rows(out + offset, out_numel(), in[k], per_in, batch, per_in, false, stream());
      offset += per_in;
    }
  }
  void backward(const OpContext&, const float* const*, const float*, const float* dout,
                const GradOut* din, int batch) override {
    int64_t offset = 0;
    for (size_t k = 0; k < in_.size(); ++k) {
      const int64_t per_in = in_numel(k);
      if (din[k].data)
        kernels::copy_rows(din[k].data, per_in, dout + offset, out_numel(), batch, per_in,
                           din[k].accumulate, stream());
      offset += per_in;
    }
  }
};

class GpuPadChannels final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    kernels::pad_forward(in[0], out, p_, batch, stream());
  }
  void backward(const OpContext&, const float* const*, const float*, const float* dout,
                const GradOut* din, int batch) override {
    if (din[0].data)
      kernels::pad_backward(dout, din[0].data, p_, batch, din[0].accumulate, stream());
  }

 protected:
  Status configure() override {
    p_.c = static_cast<int>(in_[0][0]);
    p_.h = static_cast<int>(in_[0][1]);
    p_.w = static_cast<int>(in_[0][2]);
    p_.oc = static_cast<int>(out_[0]);
    p_.oh = static_cast<int>(out_[1]);
    p_.ow = static_cast<int>(out_[2]);
    p_.stride = static_cast<int>(attrs().stride);
    p_.before = (p_.oc - p_.c) / 2;
    return ok_status();
  }

 private:
  math::PadShape p_;
};

// ids (B, T) -> out (B, T, C) = W[ids]; dW (+)= the rows of dout at their ids (kernels.h: a
// stable sort by id, then per-id sums in position order: deterministic, the CPU's bits).
class GpuEmbedding final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void reserve(int max_batch) override {
    const int64_t n = int64_t{max_batch} * in_[0][0];
    ensure(scratch_, kernels::embedding_scratch_bytes(n, attrs().vocab), "sort scratch");
  }
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    kernels::embedding_forward(in[0], params_[0], out, batch * in_[0][0], static_cast<int>(out_[1]),
                               attrs().vocab, stream());
  }
  void backward(const OpContext& ctx, const float* const* in, const float*, const float* dout,
                const GradOut*, int batch) override {
    const int64_t n = batch * in_[0][0];
    if (n > INT_MAX) {
      ctx_.fail(unsupported("GPU embedding: more than 2^31 positions in a batch"));
      return;
    }
    const size_t bytes = kernels::embedding_scratch_bytes(n, attrs().vocab);
    if (!ensure(scratch_, bytes, "sort scratch")) return;
    cuda(kernels::embedding_backward(in[0], dout, grads_[0], n, static_cast<int>(out_[1]),
                                     attrs().vocab, accumulate_grad(ctx, 0), scratch_.data(),
                                     scratch_.bytes(), stream()),
         "embedding backward");
  }

 private:
  DeviceBuffer scratch_;
};

// in (B, T, C) -> out = in + P[t]; dP (context, C): its first T rows (+)= the batch's sum of
// dout, the others zero when written; din (+)= dout.
class GpuPositionEmbedding final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    kernels::position_forward(in[0], params_[0], out, batch, in_numel(), stream());
  }
  void backward(const OpContext& ctx, const float* const*, const float*, const float* dout,
                const GradOut* din, int batch) override {
    const int64_t tc = in_numel(), all = attrs().context * in_[0][1];
    const bool acc = accumulate_grad(ctx, 0);
    if (!acc && all > tc) ctx_.zero(grads_[0] + tc, sizeof(float) * static_cast<size_t>(all - tc));
    kernels::position_backward(dout, grads_[0], batch, tc, acc, stream());
    if (din[0].data)
      kernels::store_grad(din[0].data, dout, batch * tc, din[0].accumulate, stream());
  }
};

}  // namespace

std::unique_ptr<Op> make_gpu_add(GpuContext& ctx) { return std::make_unique<GpuAdd>(ctx); }
std::unique_ptr<Op> make_gpu_concat(GpuContext& ctx) { return std::make_unique<GpuConcat>(ctx); }
std::unique_ptr<Op> make_gpu_pad_channels(GpuContext& ctx) {
  return std::make_unique<GpuPadChannels>(ctx);
}
std::unique_ptr<Op> make_gpu_embedding(GpuContext& ctx) {
  return std::make_unique<GpuEmbedding>(ctx);
}
std::unique_ptr<Op> make_gpu_position(GpuContext& ctx) {
  return std::make_unique<GpuPositionEmbedding>(ctx);
}

}  // namespace dltune::engine::gpu
