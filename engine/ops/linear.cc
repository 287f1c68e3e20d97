#include "engine/ops/linear.h"

#include <cstring>

#include "engine/core/gemm.h"
#include "engine/core/parallel.h"
#include "engine/ops/onednn.h"

namespace dltune::engine {
namespace {

// dst (n) <- bf16_round(src), on the threads.
void round_into(ThreadPool& pool, const float* src, float* dst, int64_t n) {
  parallel_elements(pool, n,
                    [&](int64_t b, int64_t e, int) { bf16_round_array(src + b, dst + b, e - b); });
}

// dst (n) = (or += when acc) bf16_round(src).
void round_store(ThreadPool& pool, const float* src, float* dst, int64_t n, bool acc) {
  parallel_elements(pool, n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const float v = bf16_round(src[i]);
      dst[i] = acc ? dst[i] + v : v;
    }
  });
}

}  // namespace

Status Linear::configure() {
  in_features_ = attrs().flatten ? in_numel() : in_[0].back();
  out_features_ = attrs().out;
  rows_per_sample_ = in_numel() / in_features_;
  return ok_status();
}

std::vector<std::string> Linear::kernels() const {
  if (onednn_matmul_supported()) return {"blas", "onednn"};
  return {"blas"};
}

void Linear::product(const OpContext& ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                     const float* A, int64_t lda, const float* B, int64_t ldb, bool acc, float* C,
                     int64_t ldc) const {
  if (onednn_)
    return onednn_parallel_matmul(*ctx.pool, ta, tb, M, N, K, A, lda, B, ldb, acc, C, ldc);
  parallel_sgemm(*ctx.pool, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, acc ? 1.0f : 0.0f, C, ldc);
}

void Linear::reserve(int) {
  bf16_w_.resize_uninitialized(
      precision_ == Precision::kBf16 ? static_cast<size_t>(weight_floats() + out_features_) : 0);
}

void Linear::forward_on(const OpContext& ctx, const float* x, const float* w, const float* b,
                        float* out, int64_t R) const {
  // x (R, I), W (O, I), b (O) -> out (R, O) = x W^T + b
  const int64_t O = out_features_, I = in_features_;
  float beta = 0.0f;
  if (b != nullptr) {
    parallel_ranges(*ctx.pool, R, task_count(R, static_cast<double>(O), 16384.0),
                    [&](int64_t r0, int64_t r1, int) {
                      for (int64_t r = r0; r < r1; ++r)
                        std::memcpy(out + r * O, b, sizeof(float) * O);
                    });
    beta = 1.0f;
  }
  product(ctx, false, true, R, O, I, x, I, w, I, beta != 0.0f, out, O);
}

void Linear::backward_on(const OpContext& ctx, const float* x, const float* w, const float* dy,
                         float* dw, bool dw_acc, float* db, bool db_acc, float* dx, bool dx_acc,
                         int64_t R) const {
  const int64_t O = out_features_, I = in_features_;
  // dW (O, I) (+)= dy^T (O, R) x x (R, I)
  product(ctx, true, false, O, I, R, dy, O, x, I, dw_acc, dw, I);
  if (db != nullptr) {  // (O) (+)= sum over rows of dy: each column summed in row order
    parallel_ranges(*ctx.pool, O, task_count(O, static_cast<double>(R), 65536.0),
                    [&](int64_t o0, int64_t o1, int) {
                      if (!db_acc) std::memset(db + o0, 0, sizeof(float) * (o1 - o0));
                      for (int64_t r = 0; r < R; ++r) {
                        const float* d = dy + r * O;
                        for (int64_t o = o0; o < o1; ++o) db[o] += d[o];
                      }
                    });
  }
  // dx (R, I) (+)= dy (R, O) x W (O, I)
  if (dx != nullptr) product(ctx, false, false, R, I, O, dy, O, w, I, dx_acc, dx, I);
}

void Linear::forward(const OpContext& ctx, const float* const* in, float* out, int batch) {
  const int64_t R = batch * rows_per_sample_;
  const float* b = attrs().bias ? params_[1] : nullptr;
  if (precision_ != Precision::kBf16) return forward_on(ctx, in[0], params_[0], b, out, R);
  // autocast: linear(x.bf16(), W.bf16(), b.bf16()) accumulated in fp32, returned as bf16
  float* xb = ctx.workspace;
  round_into(*ctx.pool, in[0], xb, R * in_features_);
  bf16_round_array(params_[0], bf16_w_.data(), weight_floats());
  float* bb = nullptr;
  if (b != nullptr) {
    bb = bf16_w_.data() + weight_floats();
    bf16_round_array(b, bb, out_features_);
  }
  forward_on(ctx, xb, bf16_w_.data(), bb, out, R);
  round_into(*ctx.pool, out, out, R * out_features_);
}

void Linear::backward(const OpContext& ctx, const float* const* in, const float*, const float* dout,
                      const GradOut* din, int batch) {
  const int64_t R = batch * rows_per_sample_;
  const bool bias = attrs().bias;
  if (precision_ != Precision::kBf16) {
    return backward_on(ctx, in[0], params_[0], dout, grads_[0], accumulate_grad(ctx, 0),
                       bias ? grads_[1] : nullptr, bias && accumulate_grad(ctx, 1), din[0].data,
                       din[0].accumulate, R);
  }
  // The bf16 products on rounded operands; each gradient rounded, then written or added in fp32.
  const int64_t I = in_features_, O = out_features_;
  float* xb = ctx.workspace;   // (R, I)
  float* dyb = xb + R * I;     // (R, O)
  float* dx32 = dyb + R * O;   // (R, I)
  float* dw32 = dx32 + R * I;  // (O, I) then (O)
  round_into(*ctx.pool, in[0], xb, R * I);
  round_into(*ctx.pool, dout, dyb, R * O);
  bf16_round_array(params_[0], bf16_w_.data(), weight_floats());
  backward_on(ctx, xb, bf16_w_.data(), dyb, dw32, false, bias ? dw32 + weight_floats() : nullptr,
              false, din[0].data ? dx32 : nullptr, false, R);
  round_store(*ctx.pool, dw32, grads_[0], weight_floats(), accumulate_grad(ctx, 0));
  if (bias) round_store(*ctx.pool, dw32 + weight_floats(), grads_[1], O, accumulate_grad(ctx, 1));
  if (din[0].data) round_store(*ctx.pool, dx32, din[0].data, R * I, din[0].accumulate);
}

}  // namespace dltune::engine
