#include "engine/ops/elementwise.h"

#include <cmath>
#include <cstring>

#include "engine/core/counter_hash.h"
#include "engine/core/parallel.h"
#include "engine/ops/vec.h"
#include "engine/ops/vmath.h"

// Every loop here is element-wise: the ranges the threads take (parallel_elements) cannot
// change a single bit of the result.

namespace dltune::engine {

void store_grad(float* dst, const float* src, int64_t n, bool accumulate) {
  if (accumulate) {
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
  } else if (dst != src) {
    std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
  }
}

void store_grad(ThreadPool& pool, float* dst, const float* src, int64_t n, bool accumulate) {
  if (!accumulate && dst == src) return;
  parallel_elements(
      pool, n, [&](int64_t b, int64_t e, int) { store_grad(dst + b, src + b, e - b, accumulate); });
}

// ---- ReLU --------------------------------------------------------------------------------

void Relu::forward(const OpContext& ctx, const float* const* in, float* out, int batch) {
  const float* x = in[0];
  parallel_elements(*ctx.pool, batch * in_numel(), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
  });
}

void Relu::backward(const OpContext& ctx, const float* const*, const float* out, const float* dout,
                    const GradOut* din, int batch) {
  float* dx = din[0].data;
  if (!dx) return;
  const bool acc = din[0].accumulate;
  // Both loads are unconditional so that the loop vectorises into a compare-and-blend (a
  // conditional load of dout[i] kept GCC from vectorising it: 8 % of a LeNet-5 step).
  parallel_elements(*ctx.pool, batch * in_numel(), [&](int64_t b, int64_t e, int) {
    if (acc) {
      for (int64_t i = b; i < e; ++i) {
        const float d = dout[i];
        dx[i] += out[i] > 0.0f ? d : 0.0f;
      }
      return;
    }
    for (int64_t i = b; i < e; ++i) {
      const float d = dout[i];
      dx[i] = out[i] > 0.0f ? d : 0.0f;
    }
  });
}

// ---- GELU --------------------------------------------------------------------------------

namespace {
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

// GELU over [0, n) in vectors of 8 (engine/ops/vmath.h's exp; AVX2 and baseline builds), the
// tail in scalars: y = 0.5 x (1 + tanh(u)), and its gradient
// d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx, u = c (x + a x^3), with 1 + t and 1 - t computed
// apart (no cancellation where t is near -1 or 1).
typedef float v8 __attribute__((vector_size(32)));

template <class V>
[[gnu::always_inline]] inline V gelu_u(V x) {
  return kGeluC * (x + kGeluA * x * x * x);
}

[[gnu::always_inline]] inline void gelu_forward_any(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v8 v = vload<v8>(x + i);
    v8 plus, minus;
    vtanh_parts(gelu_u(v), &plus, &minus);
    vstore(y + i, 0.5f * v * plus);
  }
  for (; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(gelu_u(v)));
  }
}

[[gnu::always_inline]] inline void gelu_backward_any(const float* x, const float* dy, float* dx,
                                                     int64_t n, bool acc) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v8 v = vload<v8>(x + i);
    v8 plus, minus;
    vtanh_parts(gelu_u(v), &plus, &minus);
    const v8 du = kGeluC * (1.0f + 3.0f * kGeluA * v * v);
    v8 g = (0.5f * plus + 0.5f * v * (minus * plus) * du) * vload<v8>(dy + i);
    if (acc) g += vload<v8>(dx + i);
    vstore(dx + i, g);
  }
  for (; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(gelu_u(v));
    const float du = kGeluC * (1.0f + 3.0f * kGeluA * v * v);
    const float g = (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du) * dy[i];
    dx[i] = acc ? dx[i] + g : g;
  }
}

DLTUNE_AVX2 void gelu_forward_avx2(const float* x, float* y, int64_t n) {
  gelu_forward_any(x, y, n);
}
void gelu_forward_generic(const float* x, float* y, int64_t n) { gelu_forward_any(x, y, n); }
DLTUNE_AVX2 void gelu_backward_avx2(const float* x, const float* dy, float* dx, int64_t n,
                                    bool acc) {
  gelu_backward_any(x, dy, dx, n, acc);
}
void gelu_backward_generic(const float* x, const float* dy, float* dx, int64_t n, bool acc) {
  gelu_backward_any(x, dy, dx, n, acc);
}

}  // namespace

void Gelu::forward(const OpContext& ctx, const float* const* in, float* out, int batch) {
  const float* x = in[0];
  const bool avx2 = use_avx2_kernels();
  parallel_elements(*ctx.pool, batch * in_numel(), [&](int64_t b, int64_t e, int) {
    if (avx2) return gelu_forward_avx2(x + b, out + b, e - b);
    gelu_forward_generic(x + b, out + b, e - b);
  });
}

void Gelu::backward(const OpContext& ctx, const float* const* in, const float*, const float* dout,
                    const GradOut* din, int batch) {
  float* dx = din[0].data;
  if (!dx) return;
  const float* x = in[0];
  const bool acc = din[0].accumulate, avx2 = use_avx2_kernels();
  parallel_elements(*ctx.pool, batch * in_numel(), [&](int64_t b, int64_t e, int) {
    if (avx2) return gelu_backward_avx2(x + b, dout + b, dx + b, e - b, acc);
    gelu_backward_generic(x + b, dout + b, dx + b, e - b, acc);
  });
}

// ---- Dropout -------------------------------------------------------------------------------

void Dropout::reserve(int max_batch) { mask_.reserve(static_cast<size_t>(max_batch * in_numel())); }

void Dropout::forward(const OpContext& ctx, const float* const* in, float* out, int batch) {
  const int64_t n = batch * in_numel();
  const float p = static_cast<float>(attrs().p);
  mask_valid_ = ctx.training && p > 0.0f;
  if (!mask_valid_) return store_grad(*ctx.pool, out, in[0], n, false);
  // Counter-based (seed, element index) draws: the GPU dropout kernel makes the same mask.
  const float scale = 1.0f / (1.0f - p);
  float* m = mask_.data();
  const float* x = in[0];
  parallel_elements(*ctx.pool, n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      m[i] = counter_uniform(ctx.seed, static_cast<uint64_t>(i)) < p ? 0.0f : scale;
      out[i] = x[i] * m[i];
    }
  });
}

void Dropout::backward(const OpContext& ctx, const float* const*, const float*, const float* dout,
                       const GradOut* din, int batch) {
  float* dx = din[0].data;
  if (!dx) return;
  const int64_t n = batch * in_numel();
  if (!mask_valid_) return store_grad(*ctx.pool, dx, dout, n, din[0].accumulate);
  const float* m = mask_.data();
  const bool acc = din[0].accumulate;
  parallel_elements(*ctx.pool, n, [&](int64_t b, int64_t e, int) {
    if (acc) {
      for (int64_t i = b; i < e; ++i) dx[i] += dout[i] * m[i];
    } else {
      for (int64_t i = b; i < e; ++i) dx[i] = dout[i] * m[i];
    }
  });
}

// ---- Flatten -------------------------------------------------------------------------------

void Flatten::forward(const OpContext& ctx, const float* const* in, float* out, int batch) {
  store_grad(*ctx.pool, out, in[0], batch * in_numel(), false);
}

void Flatten::backward(const OpContext& ctx, const float* const*, const float*, const float* dout,
                       const GradOut* din, int batch) {
  if (din[0].data) store_grad(*ctx.pool, din[0].data, dout, batch * in_numel(), din[0].accumulate);
}

}  // namespace dltune::engine
