#include "engine/ops/norm.h"

#include <cmath>
#include <cstring>

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

// *sum_dy += sum of dy[i], *sum_dy_dx += sum of dy[i] (x[i] - m)
void lane_dy_sums(const float* dy, const float* x, float m, int64_t n, float* sum_dy,
                  float* sum_dy_dx) {
  float a0[kLanes] = {}, a1[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      a0[l] += dy[i + l];
      a1[l] += dy[i + l] * (x[i + l] - m);
    }
  }
  float s0 = 0.0f, s1 = 0.0f;
  for (; i < n; ++i) {
    s0 += dy[i];
    s1 += dy[i] * (x[i] - m);
  }
  for (int l = 0; l < kLanes; ++l) {
    s0 += a0[l];
    s1 += a1[l];
  }
  *sum_dy = s0;
  *sum_dy_dx = s1;
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
      for (int64_t i = 0; i < s_; ++i) yc[i] = xc[i] * a + d;
    }
  }
  if (training_ && ctx.update_state) state_[2][0] += 1.0f;
}

void BatchNorm::backward(const OpContext& ctx, const float* const* in, const float*,
                         const float* dout, const GradOut* din, int batch) {
  const float* x = in[0];
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
      lane_dy_sums(dout + (n * c_ + c) * s_, x + (n * c_ + c) * s_, mean, s_, &p0, &p1);
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
        float* dxc = dx + (n * c_ + c) * s_;
        for (int64_t i = 0; i < s_; ++i) dxc[i] = (acc ? dxc[i] : 0.0f) + dyc[i] * a;
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
      float* dxc = dx + (n * c_ + c) * s_;
      if (acc) {
        for (int64_t i = 0; i < s_; ++i) dxc[i] += a * (dyc[i] - mdy - (xc[i] - mean) * k);
      } else {
        for (int64_t i = 0; i < s_; ++i) dxc[i] = a * (dyc[i] - mdy - (xc[i] - mean) * k);
      }
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
