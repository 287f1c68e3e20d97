#include "engine/ops/norm.h"

#include <cmath>
#include <cstring>

#include "engine/ops/vec.h"

namespace dltune::engine {
namespace {

// Sums over a channel's plane in 16 independent lanes: GCC vectorises these loops (one
// accumulator per lane) where a single float accumulator would be a chain of dependent adds
// (it may not reorder float additions), 4 cycles per element.
constexpr int kLanes = 16;

// sum of x[0 .. n)
float lane_sum(const float* x, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[i + l];
  float s = 0.0f;
  for (; i < n; ++i) s += x[i];
  for (float a : acc) s += a;
  return s;
}

// sum of (x[i] - m)^2
float lane_sq_dev(const float* x, float m, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += (x[i + l] - m) * (x[i + l] - m);
  float s = 0.0f;
  for (; i < n; ++i) s += (x[i] - m) * (x[i] - m);
  for (float a : acc) s += a;
  return s;
}

// The gradient reaching the batch norm's output: dy, or with a fused ReLU (y its output) the
// ReLU's gradient where y > 0.
template <bool kRelu>
[[gnu::always_inline]] inline float grad_at(const float* dy, const float* y, int64_t i) {
  if constexpr (kRelu) return y[i] > 0.0f ? dy[i] : 0.0f;
  return dy[i];
}

// The same for 4 values, as GCC vectors of one SSE register (the baseline target this file is
// built for): plain loops with the ReLU's select were left scalar (GCC's straight-line
// vectoriser does not if-convert), and 64-byte vectors went through the stack.
typedef float v4 __attribute__((vector_size(16)));
typedef int i4 __attribute__((vector_size(16)));

template <bool kRelu>
[[gnu::always_inline]] inline v4 grad4(const float* dy, const float* y, int64_t i) {
  const v4 d = vload<v4>(dy + i);
  if constexpr (kRelu) {
    const i4 on = vload<v4>(y + i) > 0.0f;
    return on ? d : v4{};
  }
  return d;
}

// *sum_dy = sum of g[i], *sum_dy_dx = sum of g[i] (x[i] - m), g = grad_at<kRelu>: four
// independent pairs of 4-lane accumulators.
template <bool kRelu>
void lane_dy_sums(const float* dy, const float* y, const float* x, float m, int64_t n,
                  float* sum_dy, float* sum_dy_dx) {
  v4 a0[4] = {}, a1[4] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int u = 0; u < 4; ++u) {
      const v4 g = grad4<kRelu>(dy, y, i + 4 * u);
      a0[u] += g;
      a1[u] += g * (vload<v4>(x + i + 4 * u) - m);
    }
  }
  float s0 = 0.0f, s1 = 0.0f;
  for (; i < n; ++i) {
    const float g = grad_at<kRelu>(dy, y, i);
    s0 += g;
    s1 += g * (x[i] - m);
  }
  for (int u = 0; u < 4; ++u) {
    for (int l = 0; l < 4; ++l) {
      s0 += a0[u][l];
      s1 += a1[u][l];
    }
  }
  *sum_dy = s0;
  *sum_dy_dx = s1;
}

// dx[i] (+)= a (g[i] - mdy - (x[i] - mean) k), g = grad_at<kRelu>
template <bool kRelu>
void apply_dx(const float* dy, const float* y, const float* x, float a, float mdy, float mean,
              float k, int64_t n, bool accumulate, float* dx) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    v4 v = a * (grad4<kRelu>(dy, y, i) - mdy - (vload<v4>(x + i) - mean) * k);
    if (accumulate) v += vload<v4>(dx + i);
    vstore(dx + i, v);
  }
  for (; i < n; ++i) {
    const float v = a * (grad_at<kRelu>(dy, y, i) - mdy - (x[i] - mean) * k);
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

}  // namespace

// ---- BatchNorm -----------------------------------------------------------------------------

Status BatchNorm::configure() {
  c_ = in_[0][0];
  s_ = in_numel() / c_;
  mean_.resize(static_cast<size_t>(c_));
  invstd_.resize(static_cast<size_t>(c_));
  return ok_status();
}

void BatchNorm::reserve(int) {}

void BatchNorm::forward(const OpContext& ctx, const float* const* in, float* out, int batch) {
  // in (B, C, S) -> out (B, C, S); state: running_mean (C), running_var (C), count ()
  const float* x = in[0];
  const float* w = params_[0];
  const float* b = params_[1];
  float* running_mean = state_[0];
  float* running_var = state_[1];
  const double eps = attrs().eps, m = attrs().momentum;
  const int64_t N = batch * s_;
  training_ = ctx.training;
  for (int64_t c = 0; c < c_; ++c) {
    double mean = running_mean[c], var = running_var[c];
    if (training_) {
      double sum = 0.0;
      for (int n = 0; n < batch; ++n) sum += lane_sum(x + (n * c_ + c) * s_, s_);
      mean = sum / static_cast<double>(N);
      double sq = 0.0;
      const float fm = static_cast<float>(mean);
      for (int n = 0; n < batch; ++n) sq += lane_sq_dev(x + (n * c_ + c) * s_, fm, s_);
      var = sq / static_cast<double>(N);
      const double unbiased =
          N > 1 ? var * static_cast<double>(N) / static_cast<double>(N - 1) : var;
      if (ctx.update_state) {
        running_mean[c] = static_cast<float>((1.0 - m) * running_mean[c] + m * mean);
        running_var[c] = static_cast<float>((1.0 - m) * running_var[c] + m * unbiased);
      }
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    mean_[static_cast<size_t>(c)] = static_cast<float>(mean);
    invstd_[static_cast<size_t>(c)] = inv;
    // y = x a + d with a = w invstd, d = b - mean a
    const float a = w[c] * inv;
    const float d = b[c] - static_cast<float>(mean) * a;
    for (int n = 0; n < batch; ++n) {
      const float* xc = x + (n * c_ + c) * s_;
      float* yc = out + (n * c_ + c) * s_;
      if (relu_) {
        for (int64_t i = 0; i < s_; ++i) {
          const float v = xc[i] * a + d;
          yc[i] = v > 0.0f ? v : 0.0f;
        }
      } else {
        for (int64_t i = 0; i < s_; ++i) yc[i] = xc[i] * a + d;
      }
    }
  }
  if (training_ && ctx.update_state) state_[2][0] += 1.0f;
}

void BatchNorm::backward(const OpContext& ctx, const float* const* in, const float* out,
                         const float* dout, const GradOut* din, int batch) {
  if (relu_) return backward_impl<true>(ctx, in[0], out, dout, din, batch);
  backward_impl<false>(ctx, in[0], out, dout, din, batch);
}

template <bool kRelu>
void BatchNorm::backward_impl(const OpContext& ctx, const float* x, const float* y,
                              const float* dout, const GradOut* din, int batch) {
  // dout (B, C, S): the gradient of the output, or with a fused ReLU of the ReLU's output y
  const float* w = params_[0];
  float* dw = grads_[0];
  float* db = grads_[1];
  float* dx = din[0].data;
  const bool acc_w = accumulate_grad(ctx, 0), acc_b = accumulate_grad(ctx, 1);
  const double N = static_cast<double>(batch * s_);
  for (int64_t c = 0; c < c_; ++c) {
    const float mean = mean_[static_cast<size_t>(c)], inv = invstd_[static_cast<size_t>(c)];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int n = 0; n < batch; ++n) {
      float p0 = 0.0f, p1 = 0.0f;
      const int64_t at = (n * c_ + c) * s_;
      lane_dy_sums<kRelu>(dout + at, y + at, x + at, mean, s_, &p0, &p1);
      sum_dy += p0;
      sum_dy_xhat += static_cast<double>(p1) * inv;
    }
    dw[c] = static_cast<float>(sum_dy_xhat) + (acc_w ? dw[c] : 0.0f);
    db[c] = static_cast<float>(sum_dy) + (acc_b ? db[c] : 0.0f);
    if (!dx) continue;
    const bool acc = din[0].accumulate;
    if (!training_) {  // frozen statistics: y is affine in x
      const float a = w[c] * inv;
      for (int n = 0; n < batch; ++n) {
        const float* dyc = dout + (n * c_ + c) * s_;
        const float* yc = y + (n * c_ + c) * s_;
        float* dxc = dx + (n * c_ + c) * s_;
        for (int64_t i = 0; i < s_; ++i)
          dxc[i] = (acc ? dxc[i] : 0.0f) + grad_at<kRelu>(dyc, yc, i) * a;
      }
      continue;
    }
    // dx = w inv (dy - sum_dy/N - xhat sum_dy_xhat/N), xhat = (x - mean) inv
    const float a = w[c] * inv;
    const float mdy = static_cast<float>(sum_dy / N);
    const float k = static_cast<float>(sum_dy_xhat / N) * inv;  // times (x - mean)
    for (int n = 0; n < batch; ++n) {
      const float* xc = x + (n * c_ + c) * s_;
      const float* dyc = dout + (n * c_ + c) * s_;
      const float* yc = y + (n * c_ + c) * s_;
      float* dxc = dx + (n * c_ + c) * s_;
      apply_dx<kRelu>(dyc, yc, xc, a, mdy, mean, k, s_, acc, dxc);
    }
  }
}

// ---- LayerNorm -----------------------------------------------------------------------------

Status LayerNorm::configure() {
  c_ = in_[0].back();
  rows_ = in_numel() / c_;
  return ok_status();
}

void LayerNorm::reserve(int max_batch) {
  mean_.reserve(static_cast<size_t>(max_batch * rows_));
  rstd_.reserve(static_cast<size_t>(max_batch * rows_));
}

void LayerNorm::forward(const OpContext&, const float* const* in, float* out, int batch) {
  // in (R, C) -> out (R, C), R = B x rows per sample
  const float* w = params_[0];
  const float* b = params_[1];
  const float eps = static_cast<float>(attrs().eps);
  const int64_t R = batch * rows_;
  for (int64_t r = 0; r < R; ++r) {
    const float* x = in[0] + r * c_;
    float* y = out + r * c_;
    float sum = 0.0f;
    for (int64_t i = 0; i < c_; ++i) sum += x[i];
    const float mean = sum / static_cast<float>(c_);
    float sq = 0.0f;
    for (int64_t i = 0; i < c_; ++i) sq += (x[i] - mean) * (x[i] - mean);
    const float rstd = 1.0f / std::sqrt(sq / static_cast<float>(c_) + eps);
    for (int64_t i = 0; i < c_; ++i) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
    mean_[static_cast<size_t>(r)] = mean;
    rstd_[static_cast<size_t>(r)] = rstd;
  }
}

void LayerNorm::backward(const OpContext& ctx, const float* const* in, const float*,
                         const float* dout, const GradOut* din, int batch) {
  const float* w = params_[0];
  float* dw = grads_[0];
  float* db = grads_[1];
  if (!accumulate_grad(ctx, 0)) std::memset(dw, 0, sizeof(float) * c_);
  if (!accumulate_grad(ctx, 1)) std::memset(db, 0, sizeof(float) * c_);
  float* dxall = din[0].data;
  const bool acc = din[0].accumulate;
  const int64_t R = batch * rows_;
  const float inv_c = 1.0f / static_cast<float>(c_);
  for (int64_t r = 0; r < R; ++r) {
    const float* x = in[0] + r * c_;
    const float* dy = dout + r * c_;
    const float mean = mean_[static_cast<size_t>(r)], rstd = rstd_[static_cast<size_t>(r)];
    float mg = 0.0f, mgx = 0.0f;  // means of g = dy w and of g xhat
    for (int64_t i = 0; i < c_; ++i) {
      const float xhat = (x[i] - mean) * rstd;
      const float g = dy[i] * w[i];
      mg += g;
      mgx += g * xhat;
      dw[i] += dy[i] * xhat;
      db[i] += dy[i];
    }
    mg *= inv_c;
    mgx *= inv_c;
    if (!dxall) continue;
    float* dx = dxall + r * c_;
    for (int64_t i = 0; i < c_; ++i) {
      const float xhat = (x[i] - mean) * rstd;
      const float v = rstd * (dy[i] * w[i] - mg - xhat * mgx);
      dx[i] = acc ? dx[i] + v : v;
    }
  }
}

}  // namespace dltune::engine
