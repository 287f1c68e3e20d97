// The GPU twin of causal multi-head self-attention (engine/ops/attention.h), step for step as
// the CPU op: per (sample, head), S = Q K^T / sqrt(hs) as a GEMM over strided views of qkv, the
// causal softmax in place, out = P V into the head's columns of out; P (B, NH, T, T) is kept for
// backward: dV = P^T dOut, dP = dOut V^T, dS = P (dP - rowsum(dP P)) / sqrt(hs), dQ = dS K,
// dK = dS^T Q. The (sample, head) pairs run as cuBLAS strided batches (gemm_plan.h: one call per
// sample over its heads, or per head over the samples, whichever makes fewer calls), FP32 math
// (the context's cuBLAS handle has TF32 off). Backward's dP / dS lives in the context's scratch,
// one group's worth (group_size x T x T floats).
#include "engine/gpu/gpu_op.h"
#include "engine/gpu/kernels.h"

namespace dltune::engine::gpu {
namespace {

class GpuAttention final : public GpuOp {
 public:
  using GpuOp::GpuOp;

  void reserve(int max_batch) override {
    ensure(probs_, sizeof(float) * probs_floats(max_batch), "attention probabilities");
  }
  void release() override { probs_ = DeviceBuffer(); }

  void forward(const OpContext&, const float* const* in, float* out, int batch) override {
    // qkv (B, T, 3C) -> out (B, T, C)
    if (!ensure(probs_, sizeof(float) * probs_floats(batch), "attention probabilities")) return;
    const AttentionDims d = dims(batch);
    float* p = probs_.floats();
    for (int g = 0; g < d.groups(); ++g)
      if (!gemm(attention_scores(d, g, in[0], p), "attention scores")) return;
    kernels::causal_softmax(p, int64_t{batch} * d.heads * d.t, d.t, stream());
    for (int g = 0; g < d.groups(); ++g)
      if (!gemm(attention_values(d, g, p, in[0], out), "attention values")) return;
  }

  void backward(const OpContext&, const float* const* in, const float*, const float* dout,
                const GradOut* din, int batch) override {
    float* dqkv = din[0].data;
    if (!dqkv) return;
    const float beta = din[0].accumulate ? 1.0f : 0.0f;
    const AttentionDims d = dims(batch);
    const float* p = probs_.floats();
    auto* dp = static_cast<float*>(
        ctx_.scratch(sizeof(float) * static_cast<size_t>(d.group_size()) * d.t * d.t));
    if (!dp) return;
    for (int g = 0; g < d.groups(); ++g) {
      if (!gemm(attention_dv(d, g, p, dout, dqkv, beta), "attention backward (values)") ||
          !gemm(attention_dp(d, g, dout, in[0], dp), "attention backward (probabilities)"))
        return;
      kernels::causal_softmax_grad(p + attention_probs_offset(d, g), attention_probs_stride(d), dp,
                                   d.group_size(), d.t, d.scale(), stream());
      if (!gemm(attention_dq(d, g, dp, in[0], dqkv, beta), "attention backward (queries)") ||
          !gemm(attention_dk(d, g, dp, in[0], dqkv, beta), "attention backward (keys)"))
        return;
    }
  }

 private:
  AttentionDims dims(int batch) const {
    AttentionDims d;
    d.batch = batch;
    d.t = static_cast<int>(in_[0][0]);
    d.c = static_cast<int>(out_[1]);
    d.heads = static_cast<int>(attrs().heads);
    return d;
  }
  size_t probs_floats(int batch) const {
    const auto t = static_cast<size_t>(in_[0][0]);
    return static_cast<size_t>(batch) * static_cast<size_t>(attrs().heads) * t * t;
  }

  DeviceBuffer probs_;  // (B, NH, T, T) of the last forward
};

}  // namespace

std::unique_ptr<Op> make_gpu_attention(GpuContext& ctx) {
  return std::make_unique<GpuAttention>(ctx);
}

}  // namespace dltune::engine::gpu
