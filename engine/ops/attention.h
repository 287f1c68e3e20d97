// Causal multi-head self-attention (GPT-2's), on the fused q, k, v projection.
//
//   in  qkv (B, T, 3C): per position, the queries, then the keys, then the values, each C wide
//       and split into NH heads of hs = C / NH (head h uses columns [h hs, (h + 1) hs)).
//   out (B, T, C): per head, out_t = sum_{s <= t} softmax_s(q_t . k_s / sqrt(hs)) v_s.
//
// How it runs: per (sample, head), the scores S = Q K^T / sqrt(hs) are one GEMM over strided
// views of qkv (row stride 3C), the causal mask and the row softmax are applied in place, and
// out = P V is a second GEMM written into the head's columns of out (row stride C). The
// probabilities P (B, NH, T, T) are kept for backward:
//   dV = P^T dOut, dP = dOut V^T, dS = P (dP - rowsum(dP P)) / sqrt(hs), dQ = dS K, dK = dS^T Q.
// Full T x T GEMMs do the masked half's work too: at the small head sizes of the models here
// that is cheaper than skipping it element by element.
#pragma once

#include "engine/core/tensor.h"
#include "engine/ops/op.h"

namespace dltune::engine {

class Attention final : public Op {
 public:
  void reserve(int max_batch) override;
  void release() override { probs_.resize(0); }
  void forward(const OpContext& ctx, const float* const* in, float* out, int batch) override;
  void backward(const OpContext& ctx, const float* const* in, const float* out, const float* dout,
                const GradOut* din, int batch) override;

 protected:
  Status configure() override;

 private:
  int64_t thread_floats() const {  // one thread's scratch (op_memory.h)
    return attention_thread_floats(t_, hs_, precision_);
  }
  int t_ = 0, c_ = 0, heads_ = 1, hs_ = 0;
  Buffer probs_;  // (B, NH, T, T) of the last forward
};

}  // namespace dltune::engine
