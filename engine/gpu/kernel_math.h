// The arithmetic of the GPU engine's kernels, per element and per row, written once for both
// sides: the kernels (kernels*.cu) call these functions from their thread loops, and
// gpu_math_test replays the same index mapping on the CPU and compares it with the CPU ops
// (engine/ops/), so the indexing and formulas of every GPU twin are checked on machines without
// a GPU. Plain arithmetic only: no CUDA headers, no allocation, no library calls besides
// <math.h>'s float functions (the same ones the CPU ops call).
//
// Conventions: shapes as in the CPU ops (NCHW planes, row-major rows); `i` is a flat index into
// the tensor a kernel writes; gradient writers take `base`, the value they add to (0 when the
// gradient is written, the existing value when it is accumulated), and add their terms to it in
// the CPU op's order, so a sum over several terms rounds as the CPU's does.
#pragma once

#include <cstdint>

#include <math.h>

#include "engine/core/counter_hash.h"  // DLTUNE_HOST_DEVICE

namespace dltune::engine::gpu::math {

DLTUNE_HOST_DEVICE inline int imin(int a, int b) { return a < b ? a : b; }
DLTUNE_HOST_DEVICE inline int imax(int a, int b) { return a > b ? a : b; }

// ---- pooling (engine/ops/pool.h) --------------------------------------------------------------

enum class PoolMode : int { kMax, kAvg, kAdaptiveAvg };

struct PoolShape {
  int planes = 0;  // B * C
  int h = 0, w = 0, oh = 0, ow = 0;
  int k = 1, stride = 1, pad = 0;
  PoolMode mode = PoolMode::kMax;
  bool count_include_pad = true;
};

// Input rows [h0, h1), columns [w0, w1) of output (oh, ow) and the divisor of an average over
// it: Pool2d::window of engine/ops/pool.cc, rule for rule (ceil_mode windows that run past the
// padding count only the part inside it; count_include_pad false counts real pixels only).
struct PoolWindow {
  int h0, h1, w0, w1;
  float inv;
};

DLTUNE_HOST_DEVICE inline PoolWindow pool_window(const PoolShape& p, int oh, int ow) {
  if (p.mode == PoolMode::kAdaptiveAvg) {
    PoolWindow w{oh * p.h / p.oh, ((oh + 1) * p.h + p.oh - 1) / p.oh, ow * p.w / p.ow,
                 ((ow + 1) * p.w + p.ow - 1) / p.ow, 0.0f};
    w.inv = 1.0f / static_cast<float>((w.h1 - w.h0) * (w.w1 - w.w0));
    return w;
  }
  int h0 = oh * p.stride - p.pad, w0 = ow * p.stride - p.pad;
  int h1 = imin(h0 + p.k, p.h + p.pad), w1 = imin(w0 + p.k, p.w + p.pad);
  const int padded = (h1 - h0) * (w1 - w0);
  h0 = imax(h0, 0);
  w0 = imax(w0, 0);
  h1 = imin(h1, p.h);
  w1 = imin(w1, p.w);
  const int real = (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, 1.0f / static_cast<float>(p.count_include_pad ? padded : real)};
}

// Output element i of (planes, OH, OW): the window's maximum (the first maximum in row-major
// window order wins; *arg gets its index within the input plane) or average.
DLTUNE_HOST_DEVICE inline float pool_forward_at(const PoolShape& p, const float* x, int64_t i,
                                                int32_t* arg) {
  const int ow = static_cast<int>(i % p.ow);
  const int oh = static_cast<int>((i / p.ow) % p.oh);
  const int64_t plane = i / (static_cast<int64_t>(p.ow) * p.oh);
  const float* src = x + plane * p.h * p.w;
  const PoolWindow win = pool_window(p, oh, ow);
  if (p.mode == PoolMode::kMax) {
    float best = -INFINITY;
    int32_t bi = -1;
    for (int h = win.h0; h < win.h1; ++h)
      for (int w = win.w0; w < win.w1; ++w)
        if (src[h * p.w + w] > best || bi < 0) best = src[h * p.w + w], bi = h * p.w + w;
    *arg = bi;
    return best;
  }
  float s = 0.0f;
  for (int h = win.h0; h < win.h1; ++h)
    for (int w = win.w0; w < win.w1; ++w) s += src[h * p.w + w];
  return s * win.inv;
}

// Output positions along one dimension whose window may hold input position x (of `in`), as
// [lo, hi] clipped to [0, out): adaptive windows [floor(o in / out), ceil((o + 1) in / out))
// hold x for o in [floor(x out / in), ceil((x + 1) out / in) - 1]; square ones
// [o stride - pad, o stride - pad + k) for o in [floor((x + pad - k) / stride) + 1,
// floor((x + pad) / stride)]. pool_window then decides each (a ceil_mode window may end early).
DLTUNE_HOST_DEVICE inline void pool_candidates(const PoolShape& p, int x, int in, int out, int* lo,
                                               int* hi) {
  int a, b;
  if (p.mode == PoolMode::kAdaptiveAvg) {
    a = x * out / in;
    b = ((x + 1) * out + in - 1) / in - 1;
  } else {  // windows o with o stride - pad <= x < o stride - pad + k
    const int xp = x + p.pad;
    a = xp >= p.k ? (xp - p.k) / p.stride + 1 : 0;
    b = xp / p.stride;
  }
  *lo = imax(a, 0);
  *hi = imin(b, out - 1);
}

// Gradient of input element i of (planes, H, W), gathered from every window that holds it (max:
// every output whose argmax it is): base + the terms in the CPU scatter's order (outputs in
// row-major order), so no atomics and the CPU's rounding.
DLTUNE_HOST_DEVICE inline float pool_backward_at(const PoolShape& p, const float* dy,
                                                 const int32_t* arg, int64_t i, float base) {
  const int w = static_cast<int>(i % p.w);
  const int h = static_cast<int>((i / p.w) % p.h);
  const int64_t plane = i / (static_cast<int64_t>(p.w) * p.h);
  const int64_t out_base = plane * p.oh * p.ow;
  int oh_lo, oh_hi, ow_lo, ow_hi;
  pool_candidates(p, h, p.h, p.oh, &oh_lo, &oh_hi);
  pool_candidates(p, w, p.w, p.ow, &ow_lo, &ow_hi);
  float s = base;
  for (int oh = oh_lo; oh <= oh_hi; ++oh)
    for (int ow = ow_lo; ow <= ow_hi; ++ow) {
      const int64_t o = out_base + oh * p.ow + ow;
      if (p.mode == PoolMode::kMax) {
        if (arg[o] == h * p.w + w) s += dy[o];
        continue;
      }
      const PoolWindow win = pool_window(p, oh, ow);
      if (h >= win.h0 && h < win.h1 && w >= win.w0 && w < win.w1) s += dy[o] * win.inv;
    }
  return s;
}

// ---- pad_channels (engine/ops/combine.h) ------------------------------------------------------

struct PadShape {
  int c = 0, h = 0, w = 0, oc = 0, oh = 0, ow = 0, stride = 1, before = 0;
};

// Output element i of (B, OC, OH, OW): in[:, c - before, y s, x s], zero outside the channels.
DLTUNE_HOST_DEVICE inline float pad_forward_at(const PadShape& p, const float* in, int64_t i) {
  const int x = static_cast<int>(i % p.ow);
  const int y = static_cast<int>((i / p.ow) % p.oh);
  const int oc = static_cast<int>((i / (static_cast<int64_t>(p.ow) * p.oh)) % p.oc);
  const int64_t b = i / (static_cast<int64_t>(p.ow) * p.oh * p.oc);
  const int c = oc - p.before;
  if (c < 0 || c >= p.c) return 0.0f;
  return in[((b * p.c + c) * p.h + static_cast<int64_t>(y) * p.stride) * p.w +
            static_cast<int64_t>(x) * p.stride];
}

// Gradient of input element i of (B, C, H, W): base + dout at its subsampled position, if any.
DLTUNE_HOST_DEVICE inline float pad_backward_at(const PadShape& p, const float* dout, int64_t i,
                                                float base) {
  const int w = static_cast<int>(i % p.w);
  const int h = static_cast<int>((i / p.w) % p.h);
  const int c = static_cast<int>((i / (static_cast<int64_t>(p.w) * p.h)) % p.c);
  const int64_t b = i / (static_cast<int64_t>(p.w) * p.h * p.c);
  if (h % p.stride != 0 || w % p.stride != 0) return base;
  return base + dout[((b * p.oc + c + p.before) * p.oh + h / p.stride) * p.ow + w / p.stride];
}

// ---- GELU, tanh form (engine/ops/elementwise.h) -----------------------------------------------

inline constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluA = 0.044715f;

DLTUNE_HOST_DEVICE inline float gelu(float v) {
  return 0.5f * v * (1.0f + tanhf(kGeluC * (v + kGeluA * v * v * v)));
}
DLTUNE_HOST_DEVICE inline float gelu_grad(float v, float dy) {
  const float t = tanhf(kGeluC * (v + kGeluA * v * v * v));
  const float du = kGeluC * (1.0f + 3.0f * kGeluA * v * v);
  return (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du) * dy;
}

// ---- batch norm (engine/ops/norm.h) -----------------------------------------------------------
//
// Channel c's N = B x S values, flattened as j = n S + i (sample n, position i), are reduced in
// `parts` contiguous ranges (one thread block each), whose double partial sums a second pass adds
// in part order: deterministic, and exact enough that a one-pass variance (E[x^2] - mean^2 in
// double) matches the CPU's two-pass one to float rounding.

// Where value j of channel c lives in (B, C, S).
DLTUNE_HOST_DEVICE inline int64_t bn_index(int64_t j, int c, int channels, int64_t s) {
  return (j / s * channels + c) * s + j % s;
}
// Part p's range [*begin, *end) of N values split into `parts`.
DLTUNE_HOST_DEVICE inline void bn_part_range(int64_t n, int parts, int p, int64_t* begin,
                                             int64_t* end) {
  const int64_t chunk = (n + parts - 1) / parts;
  *begin = chunk * p < n ? chunk * p : n;
  *end = *begin + chunk < n ? *begin + chunk : n;
}
inline constexpr int kBnMaxParts = 64;
// Parts per channel: about 4096 values each, at most kBnMaxParts.
inline int bn_parts(int64_t n) {
  const int64_t p = (n + 4095) / 4096;
  return static_cast<int>(p < 1 ? 1 : p > kBnMaxParts ? kBnMaxParts : p);
}

// Per channel, what forward leaves for backward and the normalisation's coefficients.
struct BnStats {
  float mean, invstd;
};

// Training: the batch's statistics from sum and sum of squares over n values; updates the
// running statistics as BatchNorm::forward (PyTorch's momentum, unbiased running variance).
DLTUNE_HOST_DEVICE inline BnStats bn_train_stats(double sum, double sumsq, int64_t n, double eps,
                                                 double momentum, float* running_mean,
                                                 float* running_var) {
  const double N = static_cast<double>(n);
  const double mean = sum / N;
  double var = sumsq / N - mean * mean;
  if (var < 0.0) var = 0.0;
  const double unbiased = n > 1 ? var * N / (N - 1.0) : var;
  *running_mean = static_cast<float>((1.0 - momentum) * *running_mean + momentum * mean);
  *running_var = static_cast<float>((1.0 - momentum) * *running_var + momentum * unbiased);
  return {static_cast<float>(mean), static_cast<float>(1.0 / sqrt(var + eps))};
}
// Evaluation: the running statistics.
DLTUNE_HOST_DEVICE inline BnStats bn_eval_stats(float running_mean, float running_var, double eps) {
  return {running_mean, static_cast<float>(1.0 / sqrt(static_cast<double>(running_var) + eps))};
}
// y = x a + d with a = w invstd, d = b - mean a (per channel).
DLTUNE_HOST_DEVICE inline float bn_apply(float x, float w, float b, BnStats st) {
  const float a = w * st.invstd;
  const float d = b - st.mean * a;
  return x * a + d;
}

// Backward, per channel, from s0 = sum dy and s1 = sum dy (x - mean) over the n values.
struct BnBackward {
  float dw, db;     // the parameter gradients (without what they are added to)
  float a, mdy, k;  // dx = a (dy - mdy - (x - mean) k) in training, dy a in evaluation
};
DLTUNE_HOST_DEVICE inline BnBackward bn_backward_coefs(double s0, double s1, int64_t n, float w,
                                                       BnStats st) {
  const double N = static_cast<double>(n);
  const double sum_dy_xhat = s1 * st.invstd;
  return {static_cast<float>(sum_dy_xhat), static_cast<float>(s0), w * st.invstd,
          static_cast<float>(s0 / N), static_cast<float>(sum_dy_xhat / N) * st.invstd};
}
DLTUNE_HOST_DEVICE inline float bn_dx(float x, float dy, float mean, const BnBackward& k,
                                      bool training, float base) {
  if (!training) return base + dy * k.a;
  return base + k.a * (dy - k.mdy - (x - mean) * k.k);
}

// ---- layer norm (engine/ops/norm.h) -----------------------------------------------------------
// One warp per row of C for the row statistics and dx; the parameter gradients are column sums
// over the rows, in `parts` row ranges (bn_part_range over the rows) added in part order.

DLTUNE_HOST_DEVICE inline float ln_apply(float x, float mean, float rstd, float w, float b) {
  return (x - mean) * rstd * w + b;
}
// mg = mean(dy w), mgx = mean(dy w xhat) over the row.
DLTUNE_HOST_DEVICE inline float ln_dx(float x, float dy, float w, float mean, float rstd, float mg,
                                      float mgx, float base) {
  const float xhat = (x - mean) * rstd;
  return base + rstd * (dy * w - mg - xhat * mgx);
}
inline int ln_parts(int64_t rows) {
  const int64_t p = (rows + 63) / 64;
  return static_cast<int>(p < 1 ? 1 : p > 256 ? 256 : p);
}

// ---- attention's causal softmax (engine/ops/attention.h) --------------------------------------
// Row t of a (T, T) score block: softmax over s <= t, zero above. The kernels reduce the row's
// maximum, sum and dot product across a warp; these sequential versions are the reference the
// test replays.

DLTUNE_HOST_DEVICE inline void causal_softmax_row(float* row, int t, int T) {
  float mx = row[0];
  for (int s = 1; s <= t; ++s) mx = row[s] > mx ? row[s] : mx;
  float sum = 0.0f;
  for (int s = 0; s <= t; ++s) {
    row[s] = expf(row[s] - mx);
    sum += row[s];
  }
  const float inv = 1.0f / sum;
  for (int s = 0; s <= t; ++s) row[s] *= inv;
  for (int s = t + 1; s < T; ++s) row[s] = 0.0f;
}
// dS = P (dP - rowsum(dP P)) scale in place of dP's row t.
DLTUNE_HOST_DEVICE inline void causal_softmax_grad_row(const float* p, float* d, int t, int T,
                                                       float scale) {
  float dot = 0.0f;
  for (int s = 0; s <= t; ++s) dot += d[s] * p[s];
  for (int s = 0; s <= t; ++s) d[s] = p[s] * (d[s] - dot) * scale;
  for (int s = t + 1; s < T; ++s) d[s] = 0.0f;
}

// ---- embeddings (engine/ops/embedding.h) ------------------------------------------------------

// The row of token id v (a float holding an integer), clamped to [0, vocab) as the CPU does.
DLTUNE_HOST_DEVICE inline int64_t embedding_row(float v, int64_t vocab) {
  const auto id = static_cast<int64_t>(v);
  return id < 0 ? 0 : id >= vocab ? vocab - 1 : id;
}

// ---- optimizers (engine/optim/optimizer.h) ----------------------------------------------------

DLTUNE_HOST_DEVICE inline void sgd_update(float* w, float g, float* v, float lr, float mu,
                                          float wd) {
  *v = mu * *v + (g + wd * *w);
  *w -= lr * *v;
}

// AdamW's per-step scalars, computed as AdamW::step does (float lr and betas, double powers).
struct AdamwScalars {
  float step_size, inv_bc2, decay, b1, b2, eps;
};
inline AdamwScalars adamw_scalars(float lr, float b1, float b2, float eps, float weight_decay,
                                  int64_t step) {
  const double t = static_cast<double>(step);
  return {static_cast<float>(lr / (1.0 - pow(static_cast<double>(b1), t))),
          static_cast<float>(1.0 / sqrt(1.0 - pow(static_cast<double>(b2), t))),
          1.0f - lr * weight_decay,
          b1,
          b2,
          eps};
}
DLTUNE_HOST_DEVICE inline void adamw_update(float* w, float g, float* m, float* v,
                                            const AdamwScalars& s) {
  *w *= s.decay;
  *m = s.b1 * *m + (1.0f - s.b1) * g;
  *v = s.b2 * *v + (1.0f - s.b2) * g * g;
  *w -= s.step_size * *m / (sqrtf(*v) * s.inv_bc2 + s.eps);
}

// clip_grad_norm's scale from the squared norm: max_norm / (norm + 1e-6) when below 1, else 1.
DLTUNE_HOST_DEVICE inline float clip_coef(double sumsq, double max_norm) {
  const double coef = max_norm / (sqrt(sumsq) + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

}  // namespace dltune::engine::gpu::math
