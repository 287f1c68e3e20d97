#include "engine/ops/norm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/core/parallel.h"
#include "engine/ops/vec.h"

namespace dltune::engine {
namespace {

// Batch norm's kernels over one channel's plane of one image (n values), built twice
// (engine/ops/vec.h): with V = v16 for AVX-512 and V = v4 for the baseline (GCC vectors of one
// register each: plain loops with the ReLU's select were left scalar, as GCC's straight-line
// vectoriser does not if-convert, and 64-byte vectors in the baseline go through the stack).
// The planes of one channel over the batch stay in L2 between its passes, so the passes are
// bound by arithmetic, and the AVX-512 build's 16 floats per instruction took resnet20's
// batch norms (b64, one thread, with the channel groups below) from 26.7 to 21 ms a step.
//
// Sums run in 32 independent lanes (lane l takes the values at i = l mod 32) in both builds,
// so they round the same way in both: a single float accumulator would be a chain of
// dependent adds (GCC may not reorder float additions), 4 cycles per element.
constexpr int kLanes = 32;

typedef float v4 __attribute__((vector_size(16)));
typedef float v8 __attribute__((vector_size(32)));
typedef float v16 __attribute__((vector_size(64)));

template <class V>
constexpr int kWidth = static_cast<int>(sizeof(V) / sizeof(float));

// The lanes' partial sums, added in lane order, after the tail s.
template <class V>
[[gnu::always_inline]] inline float reduce(const V* acc, float s) {
  for (int a = 0; a < kLanes / kWidth<V>; ++a)
    for (int l = 0; l < kWidth<V>; ++l) s += acc[a][l];
  return s;
}

// sum of x[0 .. n)
template <class V>
[[gnu::always_inline]] inline float lane_sum(const float* x, int64_t n) {
  constexpr int W = kWidth<V>;
  V acc[kLanes / W] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int a = 0; a < kLanes / W; ++a) acc[a] += vload<V>(x + i + a * W);
  float s = 0.0f;
  for (; i < n; ++i) s += x[i];
  return reduce(acc, s);
}

// sum of (x[i] - m)^2
template <class V>
[[gnu::always_inline]] inline float lane_sq_dev(const float* x, float m, int64_t n) {
  constexpr int W = kWidth<V>;
  V acc[kLanes / W] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int a = 0; a < kLanes / W; ++a) {
      const V d = vload<V>(x + i + a * W) - m;
      acc[a] += d * d;
    }
  }
  float s = 0.0f;
  for (; i < n; ++i) s += (x[i] - m) * (x[i] - m);
  return reduce(acc, s);
}

// y[i] = x[i] a + d, or max(0, that) with a fused ReLU
template <class V, bool kRelu>
[[gnu::always_inline]] inline void normalize(const float* x, float a, float d, int64_t n,
                                             float* y) {
  constexpr int W = kWidth<V>;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    V v = vload<V>(x + i) * a + d;
    if constexpr (kRelu) v = v > 0.0f ? v : V{};
    vstore(y + i, v);
  }
  for (; i < n; ++i) {
    const float v = x[i] * a + d;
    y[i] = kRelu ? (v > 0.0f ? v : 0.0f) : v;
  }
}

// The gradient reaching the batch norm's output: dy, or with a fused ReLU the ReLU's gradient
// where its input x a + d > 0, computed as normalize() computed it (the same expression in the
// same build, so the same bits): one stream fewer than reading the output back. One value, or
// W from i.
template <bool kRelu>
[[gnu::always_inline]] inline float grad_at(const float* dy, const float* x, float a, float d,
                                            int64_t i) {
  if constexpr (kRelu) {
    const float v = x[i] * a + d;
    return v > 0.0f ? dy[i] : 0.0f;
  }
  return dy[i];
}

template <class V, bool kRelu>
[[gnu::always_inline]] inline V grad_v(const float* dy, const float* x, float a, float d,
                                       int64_t i) {
  const V g = vload<V>(dy + i);
  if constexpr (kRelu) {
    const V v = vload<V>(x + i) * a + d;
    return v > 0.0f ? g : V{};
  }
  return g;
}

// *sum_dy = sum of g[i], *sum_dy_dx = sum of g[i] (x[i] - m), g = grad_at<kRelu> (ya, yd: the
// forward's a, d)
template <class V, bool kRelu>
[[gnu::always_inline]] inline void lane_dy_sums(const float* dy, const float* x, float ya, float yd,
                                                float m, int64_t n, float* sum_dy,
                                                float* sum_dy_dx) {
  constexpr int W = kWidth<V>;
  V a0[kLanes / W] = {}, a1[kLanes / W] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int a = 0; a < kLanes / W; ++a) {
      const V g = grad_v<V, kRelu>(dy, x, ya, yd, i + a * W);
      a0[a] += g;
      a1[a] += g * (vload<V>(x + i + a * W) - m);
    }
  }
  float s0 = 0.0f, s1 = 0.0f;
  for (; i < n; ++i) {
    const float g = grad_at<kRelu>(dy, x, ya, yd, i);
    s0 += g;
    s1 += g * (x[i] - m);
  }
  *sum_dy = reduce(a0, s0);
  *sum_dy_dx = reduce(a1, s1);
}

// dx[i] (+)= a (g[i] - mdy - (x[i] - mean) k), g = grad_at<kRelu> (a, d: the forward's)
template <class V, bool kRelu>
[[gnu::always_inline]] inline void apply_dx(const float* dy, const float* x, float a, float d,
                                            float mdy, float mean, float k, int64_t n,
                                            bool accumulate, float* dx) {
  constexpr int W = kWidth<V>;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    V v = a * (grad_v<V, kRelu>(dy, x, a, d, i) - mdy - (vload<V>(x + i) - mean) * k);
    if (accumulate) v += vload<V>(dx + i);
    vstore(dx + i, v);
  }
  for (; i < n; ++i) {
    const float v = a * (grad_at<kRelu>(dy, x, a, d, i) - mdy - (x[i] - mean) * k);
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

// One build's kernels, as the batch norm calls them.
struct BnKernels {
  float (*sum)(const float* x, int64_t n);
  float (*sq_dev)(const float* x, float m, int64_t n);
  void (*normalize[2])(const float* x, float a, float d, int64_t n, float* y);  // [relu]
  void (*dy_sums[2])(const float* dy, const float* x, float ya, float yd, float m, int64_t n,
                     float* sum_dy, float* sum_dy_dx);
  void (*apply_dx[2])(const float* dy, const float* x, float a, float d, float mdy, float mean,
                      float k, int64_t n, bool accumulate, float* dx);
};

// The instantiations of one build: BN_KERNELS(ATTR, V, suffix) defines suffix-named functions
// compiled with ATTR (DLTUNE_AVX512 or nothing) for vector type V.
#define BN_KERNELS(ATTR, V, SUFFIX)                                                         \
  ATTR float sum_##SUFFIX(const float* x, int64_t n) { return lane_sum<V>(x, n); }          \
  ATTR float sq_dev_##SUFFIX(const float* x, float m, int64_t n) {                          \
    return lane_sq_dev<V>(x, m, n);                                                         \
  }                                                                                         \
  template <bool kRelu>                                                                     \
  ATTR void normalize_##SUFFIX(const float* x, float a, float d, int64_t n, float* y) {     \
    normalize<V, kRelu>(x, a, d, n, y);                                                     \
  }                                                                                         \
  template <bool kRelu>                                                                     \
  ATTR void dy_sums_##SUFFIX(const float* dy, const float* x, float ya, float yd, float m,  \
                             int64_t n, float* s0, float* s1) {                             \
    lane_dy_sums<V, kRelu>(dy, x, ya, yd, m, n, s0, s1);                                    \
  }                                                                                         \
  template <bool kRelu>                                                                     \
  ATTR void apply_dx_##SUFFIX(const float* dy, const float* x, float a, float d, float mdy, \
                              float mean, float k, int64_t n, bool acc, float* dx) {        \
    apply_dx<V, kRelu>(dy, x, a, d, mdy, mean, k, n, acc, dx);                              \
  }                                                                                         \
  const BnKernels kBn_##SUFFIX = {sum_##SUFFIX,                                             \
                                  sq_dev_##SUFFIX,                                          \
                                  {normalize_##SUFFIX<false>, normalize_##SUFFIX<true>},    \
                                  {dy_sums_##SUFFIX<false>, dy_sums_##SUFFIX<true>},        \
                                  {apply_dx_##SUFFIX<false>, apply_dx_##SUFFIX<true>}};

BN_KERNELS(DLTUNE_AVX512, v16, avx512)
BN_KERNELS(DLTUNE_AVX2, v8, avx2)
BN_KERNELS(, v4, generic)
#undef BN_KERNELS

const BnKernels& bn_kernels() {
  return use_avx512_kernels() ? kBn_avx512 : use_avx2_kernels() ? kBn_avx2 : kBn_generic;
}

// Channels the batch norm works on together: enough that an image's share of them is a
// contiguous run of 4 KiB or more, since the passes visit the batch's images in turn and a
// plane of 64 floats (resnet20's last stage) alone is too short a run for the prefetchers
// (those batch norms took as long as the previous stage's twice larger ones). The group's
// planes over the batch (256 KiB at batch 64) stay in L2 between the passes.
constexpr int64_t kMaxGroup = 64;

int64_t channel_group(int64_t channels, int64_t plane) {
  return std::clamp<int64_t>(1024 / std::max<int64_t>(plane, 1), 1, std::min(channels, kMaxGroup));
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
  const BnKernels& k = bn_kernels();
  training_ = ctx.training;
  // The threads take channel groups: every channel's statistics, normalisation and running
  // update are one task's, in the same order whatever the thread count.
  const int64_t group = channel_group(c_, s_);
  ctx.pool->run((c_ + group - 1) / group, [&](int64_t gi, int) {
    const int64_t c0 = gi * group;
    const int64_t c1 = std::min(c_, c0 + group);
    double sum[kMaxGroup] = {}, sq[kMaxGroup] = {};
    if (training_) {
      for (int n = 0; n < batch; ++n)
        for (int64_t c = c0; c < c1; ++c) sum[c - c0] += k.sum(x + (n * c_ + c) * s_, s_);
      for (int n = 0; n < batch; ++n) {
        for (int64_t c = c0; c < c1; ++c) {
          const auto fm = static_cast<float>(sum[c - c0] / static_cast<double>(N));
          sq[c - c0] += k.sq_dev(x + (n * c_ + c) * s_, fm, s_);
        }
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      double mean = running_mean[c], var = running_var[c];
      if (training_) {
        mean = sum[c - c0] / static_cast<double>(N);
        var = sq[c - c0] / static_cast<double>(N);
        const double unbiased =
            N > 1 ? var * static_cast<double>(N) / static_cast<double>(N - 1) : var;
        if (ctx.update_state) {
          running_mean[c] = static_cast<float>((1.0 - m) * running_mean[c] + m * mean);
          running_var[c] = static_cast<float>((1.0 - m) * running_var[c] + m * unbiased);
        }
      }
      mean_[static_cast<size_t>(c)] = static_cast<float>(mean);
      invstd_[static_cast<size_t>(c)] = static_cast<float>(1.0 / std::sqrt(var + eps));
    }
    // y = x a + d with a = w invstd, d = b - mean a
    for (int n = 0; n < batch; ++n) {
      for (int64_t c = c0; c < c1; ++c) {
        const float a = w[c] * invstd_[static_cast<size_t>(c)];
        const float d = b[c] - mean_[static_cast<size_t>(c)] * a;
        k.normalize[relu_](x + (n * c_ + c) * s_, a, d, s_, out + (n * c_ + c) * s_);
      }
    }
  });
  if (training_ && ctx.update_state) state_[2][0] += 1.0f;
}

void BatchNorm::backward(const OpContext& ctx, const float* const* in, const float* /*out*/,
                         const float* dout, const GradOut* din, int batch) {
  if (relu_) return backward_impl<true>(ctx, in[0], dout, din, batch);
  backward_impl<false>(ctx, in[0], dout, din, batch);
}

template <bool kRelu>
void BatchNorm::backward_impl(const OpContext& ctx, const float* x, const float* dout,
                              const GradOut* din, int batch) {
  // dout (B, C, S): the gradient of the output, or with a fused ReLU of the ReLU's output,
  // whose mask is recomputed from x (forward's a and d below)
  const float* w = params_[0];
  const float* b = params_[1];
  float* dw = grads_[0];
  float* db = grads_[1];
  float* dx = din[0].data;
  const bool acc_w = accumulate_grad(ctx, 0), acc_b = accumulate_grad(ctx, 1);
  const double N = static_cast<double>(batch * s_);
  const BnKernels& kern = bn_kernels();
  const bool acc = din[0].accumulate;
  const int64_t group = channel_group(c_, s_);  // as forward: one task per group
  ctx.pool->run((c_ + group - 1) / group, [&](int64_t gi, int) {
    const int64_t c0 = gi * group;
    const int64_t c1 = std::min(c_, c0 + group);
    double sum_dy[kMaxGroup] = {}, sum_dy_xhat[kMaxGroup] = {};
    for (int n = 0; n < batch; ++n) {
      for (int64_t c = c0; c < c1; ++c) {
        float p0 = 0.0f, p1 = 0.0f;
        const int64_t at = (n * c_ + c) * s_;
        const float mean = mean_[static_cast<size_t>(c)];
        const float a = w[c] * invstd_[static_cast<size_t>(c)], d = b[c] - mean * a;
        kern.dy_sums[kRelu](dout + at, x + at, a, d, mean, s_, &p0, &p1);
        sum_dy[c - c0] += p0;
        sum_dy_xhat[c - c0] += static_cast<double>(p1) * invstd_[static_cast<size_t>(c)];
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      dw[c] = static_cast<float>(sum_dy_xhat[c - c0]) + (acc_w ? dw[c] : 0.0f);
      db[c] = static_cast<float>(sum_dy[c - c0]) + (acc_b ? db[c] : 0.0f);
    }
    if (!dx) return;
    for (int n = 0; n < batch; ++n) {
      for (int64_t c = c0; c < c1; ++c) {
        const float mean = mean_[static_cast<size_t>(c)], inv = invstd_[static_cast<size_t>(c)];
        const int64_t at = (n * c_ + c) * s_;
        const float a = w[c] * inv, d = b[c] - mean * a;  // as forward
        if (!training_) {                                 // frozen statistics: y is affine in x
          for (int64_t i = 0; i < s_; ++i)
            dx[at + i] = (acc ? dx[at + i] : 0.0f) + grad_at<kRelu>(dout + at, x + at, a, d, i) * a;
          continue;
        }
        // dx = w inv (dy - sum_dy/N - xhat sum_dy_xhat/N), xhat = (x - mean) inv
        const auto mdy = static_cast<float>(sum_dy[c - c0] / N);
        const float k = static_cast<float>(sum_dy_xhat[c - c0] / N) * inv;  // times (x - mean)
        kern.apply_dx[kRelu](dout + at, x + at, a, d, mdy, mean, k, s_, acc, dx + at);
      }
    }
  });
}

}  // namespace dltune::engine
