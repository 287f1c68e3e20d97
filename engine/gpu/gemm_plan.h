// The matrix products of the GPU linear and attention ops, as plain descriptions of cuBLAS
// calls: the op executes them with cublasSgemm / cublasSgemmStridedBatched (GpuOp::gemm), and
// gpu_math_test executes them with a reference column-major GEMM on host memory and compares the
// result with the CPU op, so the argument order (transposes, leading dimensions, strides) is
// checked without a GPU. Compiled in every build (no CUDA types); pointers are only offset here,
// never read.
//
// Row-major tensors meet column-major cuBLAS as usual: a row-major (R, C) matrix with row
// stride ld IS the column-major (C, R) matrix with leading dimension ld, its transpose. So a
// row-major product Y = A B is computed as the column-major Y^T = B^T A^T.
#pragma once

#include <cstdint>

namespace dltune::engine::gpu {

// for i < batch:  C_i (m x n) = alpha op(A_i) (m x k) op(B_i) (k x n) + beta C_i, column-major,
// with X_i = x + i stride_x and op(X) = X^T when trans_x. beta == 0 never reads C (cuBLAS's rule).
struct Gemm {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float* a = nullptr;
  int lda = 0;
  int64_t stride_a = 0;
  const float* b = nullptr;
  int ldb = 0;
  int64_t stride_b = 0;
  float beta = 0.0f;
  float* c = nullptr;
  int ldc = 0;
  int64_t stride_c = 0;
  int batch = 1;
};

// cuBLAS's argument rules: sizes >= 0, batch >= 1, lda >= rows of A as stored (m, or k when
// transposed), ldb >= rows of B as stored (k, or n), ldc >= m, all >= 1.
bool gemm_valid(const Gemm& g);

// ---- linear: in (R, I), W (O, I), b (O) -> out (R, O) (engine/ops/linear.h) --------------------

// out (R, O) = in W^T, added to what out holds when beta is 1 (the bias, filled first).
Gemm linear_forward(const float* in, const float* w, float* out, int rows, int in_features,
                    int out_features, float beta);
// dW (O, I) (+)= dout^T in.
Gemm linear_weight_grad(const float* in, const float* dout, float* dw, int rows, int in_features,
                        int out_features, float beta);
// din (R, I) (+)= dout W.
Gemm linear_input_grad(const float* dout, const float* w, float* din, int rows, int in_features,
                       int out_features, float beta);
// db (O) (+)= dout^T ones: the column sums of dout (R, O) as a product with ones (R).
Gemm linear_bias_grad(const float* dout, const float* ones, float* db, int rows, int out_features,
                      float beta);

// ---- causal self-attention (engine/ops/attention.h) ---------------------------------------------
//
// qkv (B, T, 3C) -> out (B, T, C) over NH heads of hs = C / NH; probabilities P (B, NH, T, T).
// Each product runs for every (sample, head) pair as strided batches: one call per sample over
// its heads (batch NH, stride hs in qkv) when B <= NH, else one call per head over the samples
// (batch B, stride T 3C). A "group" is one such call's pairs.
struct AttentionDims {
  int batch = 0, t = 0, c = 0, heads = 1;
  int hs() const { return c / heads; }
  bool over_heads() const { return batch <= heads; }
  int groups() const { return over_heads() ? batch : heads; }
  int group_size() const { return over_heads() ? heads : batch; }
  float scale() const;  // 1 / sqrt(hs)
};

// P(g) (T, T) = scale Q K^T (the causal softmax then runs over every row of P).
Gemm attention_scores(const AttentionDims& d, int group, const float* qkv, float* probs);
// out(g) (T, hs) = P V, into the heads' columns of out (row stride C).
Gemm attention_values(const AttentionDims& d, int group, const float* probs, const float* qkv,
                      float* out);
// Backward, with dp a scratch of group_size() x (T, T):
// dV (+)= P^T dOut;  dP = dOut V^T (into dp);  then (after the softmax gradient turns dp into dS)
// dQ (+)= dS K;  dK (+)= dS^T Q.
Gemm attention_dv(const AttentionDims& d, int group, const float* probs, const float* dout,
                  float* dqkv, float beta);
Gemm attention_dp(const AttentionDims& d, int group, const float* dout, const float* qkv,
                  float* dp);
Gemm attention_dq(const AttentionDims& d, int group, const float* dp, const float* qkv, float* dqkv,
                  float beta);
Gemm attention_dk(const AttentionDims& d, int group, const float* dp, const float* qkv, float* dqkv,
                  float beta);
// Where the group's probabilities start and the stride between its pairs (floats).
int64_t attention_probs_offset(const AttentionDims& d, int group);
int64_t attention_probs_stride(const AttentionDims& d);

}  // namespace dltune::engine::gpu
