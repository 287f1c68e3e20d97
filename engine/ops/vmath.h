// exp and the GELU's tanh for GCC vector values (engine/ops/vec.h), so that the loops that call
// them vectorise: libm's scalar expf / tanhf cost 20-40 ns an element, and GPT-tiny's GELUs and
// attention softmaxes spent a third of its step in them.
//
// vexp is Cephes' expf: x = n ln 2 + r with |r| <= ln 2 / 2, exp(r) by a degree-6 polynomial,
// 2^n put into the exponent bits; relative error below 2e-7 over [-87.3, 88.7] (inputs outside
// are clamped: exp(-87.3) is the smallest normal float). Written for any vector width; each
// caller compiles it in its AVX2 and baseline builds.
#pragma once

#include <cstdint>
#include <cstring>

namespace dltune::engine {

template <class V>
[[gnu::always_inline]] inline V vexp(V x) {
  typedef int32_t I __attribute__((vector_size(sizeof(V))));
  const V hi = V{} + 88.3762626647949f, lo = V{} - 87.3365447504f;
  x = x > hi ? hi : x;
  x = x < lo ? lo : x;
  // n = round(x / ln 2), as floor(x log2 e + 0.5)
  V fx = x * 1.44269504088896341f + 0.5f;
  I n = __builtin_convertvector(fx, I);
  V fn = __builtin_convertvector(n, V);
  fn = fn > fx ? fn - 1.0f : fn;  // the conversion truncated toward zero: floor
  n = __builtin_convertvector(fn, I);
  x = x - fn * 0.693359375f - fn * -2.12194440e-4f;  // ln 2 in two parts
  const V z = x * x;
  V y = x * 1.9875691500e-4f + 1.3981999507e-3f;
  y = y * x + 8.3334519073e-3f;
  y = y * x + 4.1665795894e-2f;
  y = y * x + 1.6666665459e-1f;
  y = y * x + 5.0000001201e-1f;
  y = y * z + x + 1.0f;
  const I bits = (n + 127) << 23;  // 2^n
  V scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

// The GELU's pieces for u = sqrt(2/pi) (x + 0.044715 x^3): one_plus = 1 + tanh(u) and
// one_minus = 1 - tanh(u), both from s = exp(-2u) without cancellation (2 / (1 + s) and
// 2 s / (1 + s)); u is clamped to [-20, 20], where tanh is +-1 in float.
template <class V>
[[gnu::always_inline]] inline void vtanh_parts(V u, V* one_plus, V* one_minus) {
  const V lim = V{} + 20.0f;
  u = u > lim ? lim : u;
  u = u < -lim ? -lim : u;
  const V s = vexp(-2.0f * u);
  const V inv = 2.0f / (1.0f + s);
  *one_plus = inv;
  *one_minus = s * inv;
}

}  // namespace dltune::engine
