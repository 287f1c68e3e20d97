#include "engine/ops/conv_direct.h"

#include <algorithm>
#include <cstring>

#include "engine/ops/vec.h"

// Every kernel below exists in an AVX2 + FMA build and a baseline build; the dynamic loader
// picks one (GCC function multi-versioning). The inner loops run over 8 floats so that the
// AVX2 build turns each into one fused multiply-add on a register.
#define DLTUNE_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))

namespace dltune::engine {
namespace {

constexpr int kLanes = 8;

// 8 floats as one value: an AVX register in the x86-64-v3 build, two SSE registers otherwise.
// (Written as plain loops over 8 lanes, GCC vectorised across the taps instead.)
typedef float v8 __attribute__((vector_size(32)));

// plane (ph, pw) <- image (h, w) at (pad, pad), zeros elsewhere.
void pad_image(const DirectConvShape& s, const float* image, float* plane) {
  std::memset(plane, 0, sizeof(float) * s.ph * s.pw);
  for (int y = 0; y < s.h; ++y) {
    std::memcpy(plane + int64_t{y + s.pad} * s.pw + s.pad, image + int64_t{y} * s.w,
                sizeof(float) * s.w);
  }
}

// rows (oh, ow8) <- plane (oh, ow), zeros in the columns past ow.
void pad_rows(const DirectConvShape& s, const float* plane, float* rows) {
  for (int y = 0; y < s.oh; ++y) {
    float* r = rows + int64_t{y} * s.ow8;
    std::memcpy(r, plane + int64_t{y} * s.ow, sizeof(float) * s.ow);
    std::fill(r + s.ow, r + s.ow8, 0.0f);
  }
}

// N chunks of 8 output pixels of row y, from x0: N independent accumulators, so that the
// multiply-adds of one tap do not wait for each other (one accumulator: one FMA latency, 4
// cycles, per 8 pixels and tap).
template <int N>
[[gnu::always_inline]] inline void forward_chunks(const DirectConvShape& s, const float* w,
                                                  float bias, const float* padded, int y, int x0,
                                                  float* out_row) {
  v8 acc[N];
  for (int j = 0; j < N; ++j) acc[j] = v8{} + bias;
  for (int ki = 0; ki < s.k; ++ki) {
    const float* row = padded + int64_t{y + ki} * s.pw + x0;
    for (int kj = 0; kj < s.k; ++kj) {
      const float wv = w[ki * s.k + kj];
      for (int j = 0; j < N; ++j) acc[j] += wv * vload<v8>(row + kj + j * kLanes);
    }
  }
  float lanes[N * kLanes];
  for (int j = 0; j < N; ++j) vstore(lanes + j * kLanes, acc[j]);
  std::memcpy(out_row + x0, lanes, sizeof(float) * std::min(N * kLanes, s.ow - x0));
}

DLTUNE_MULTIVERSION
void forward_channel(const DirectConvShape& s, const float* w, float bias, const float* padded,
                     float* out) {
  for (int y = 0; y < s.oh; ++y) {
    float* out_row = out + int64_t{y} * s.ow;
    int x0 = 0;
    for (; x0 + 4 * kLanes <= s.ow8; x0 += 4 * kLanes) {
      forward_chunks<4>(s, w, bias, padded, y, x0, out_row);
    }
    for (; x0 < s.ow8; x0 += kLanes) forward_chunks<1>(s, w, bias, padded, y, x0, out_row);
  }
}

// dw[kj0 .. kj0 + N) of kernel row ki += the output plane's drows times those taps' windows:
// N accumulators sharing each load of drows.
template <int N>
[[gnu::always_inline]] inline void weight_grad_taps(const DirectConvShape& s, const float* padded,
                                                    const float* drows, int ki, int kj0,
                                                    float* dw) {
  v8 acc[N] = {};
  for (int y = 0; y < s.oh; ++y) {
    const float* prow = padded + int64_t{y + ki} * s.pw + kj0;
    const float* drow = drows + int64_t{y} * s.ow8;
    for (int x0 = 0; x0 < s.ow8; x0 += kLanes) {
      const v8 d = vload<v8>(drow + x0);
      for (int j = 0; j < N; ++j) acc[j] += d * vload<v8>(prow + j + x0);
    }
  }
  for (int j = 0; j < N; ++j) {
    float sum = 0.0f;
    for (int i = 0; i < kLanes; ++i) sum += acc[j][i];
    dw[ki * s.k + kj0 + j] += sum;
  }
}

// weight_grad_taps<n> for a run-time n in [1, N].
template <int N>
[[gnu::always_inline]] inline void weight_grad_block(const DirectConvShape& s, const float* padded,
                                                     const float* drows, int ki, int kj0, int n,
                                                     float* dw) {
  if constexpr (N > 1) {
    if (n < N) return weight_grad_block<N - 1>(s, padded, drows, ki, kj0, n, dw);
  }
  weight_grad_taps<N>(s, padded, drows, ki, kj0, dw);
}

// dw (k, k) += sum over the output plane of drows * the tap's shifted window of `padded`.
DLTUNE_MULTIVERSION
void weight_grad_channel(const DirectConvShape& s, const float* padded, const float* drows,
                         float* dw) {
  // A kernel row in near-equal blocks of at most 6 taps (7 live registers of 16): a block of
  // one tap would be one dependent chain of multiply-adds, as slow as a block of four.
  const int blocks = (s.k + 5) / 6;
  for (int ki = 0; ki < s.k; ++ki) {
    for (int b = 0; b < blocks; ++b) {
      const int kj = s.k * b / blocks, n = s.k * (b + 1) / blocks - kj;
      weight_grad_block<6>(s, padded, drows, ki, kj, n, dw);
    }
  }
}

// dplane (ph, pw) += every tap's weight times drows, shifted to the tap.
DLTUNE_MULTIVERSION
void image_grad_channel(const DirectConvShape& s, const float* w, const float* drows,
                        float* dplane) {
  const int k = s.k;
  for (int y = 0; y < s.oh; ++y) {
    const float* drow = drows + int64_t{y} * s.ow8;
    for (int ki = 0; ki < k; ++ki) {
      float* prow = dplane + int64_t{y + ki} * s.pw;
      for (int kj = 0; kj < k; ++kj) {
        const float wv = w[ki * k + kj];
        for (int x0 = 0; x0 < s.ow8; x0 += kLanes) {
          vstore(prow + kj + x0, vload<v8>(prow + kj + x0) + wv * vload<v8>(drow + x0));
        }
      }
    }
  }
}

}  // namespace

bool DirectConvShape::init(int out_channels, int kernel, int padding, int in_h, int in_w) {
  if (out_channels < 1 || kernel < 1 || padding < 0 || in_h < 1 || in_w < 1) return false;
  oc = out_channels, k = kernel, pad = padding, h = in_h, w = in_w;
  oh = h + 2 * pad - k + 1;
  ow = w + 2 * pad - k + 1;
  if (oh < 1 || ow < 1) return false;
  ow8 = (ow + kLanes - 1) / kLanes * kLanes;
  ph = h + 2 * pad;
  pw = ow8 + k - 1;  // >= w + 2 pad, since w + 2 pad = ow + k - 1
  return true;
}

int64_t DirectConvShape::scratch_floats() const {
  // the padded image, the padded image gradient, the padded rows of one output channel; then a
  // caller's image gradient
  return image_grad_offset() + int64_t{h} * w;
}

void direct_conv_forward(const DirectConvShape& s, const float* weights, const float* bias,
                         const float* image, float* out, float* scratch) {
  float* padded = scratch;
  pad_image(s, image, padded);
  const int64_t plane = int64_t{s.oh} * s.ow;
  for (int o = 0; o < s.oc; ++o) {
    forward_channel(s, weights + int64_t{o} * s.k * s.k, bias ? bias[o] : 0.0f, padded,
                    out + o * plane);
  }
}

void direct_conv_backward(const DirectConvShape& s, const float* weights, const float* image,
                          const float* dout, float* dweights, float* dimage, float* scratch) {
  float* padded = scratch;
  float* dplane = padded + int64_t{s.ph} * s.pw;
  float* drows = dplane + int64_t{s.ph} * s.pw;
  pad_image(s, image, padded);
  if (dimage != nullptr) std::memset(dplane, 0, sizeof(float) * s.ph * s.pw);
  const int64_t plane = int64_t{s.oh} * s.ow;
  for (int o = 0; o < s.oc; ++o) {
    pad_rows(s, dout + o * plane, drows);
    const float* w = weights + int64_t{o} * s.k * s.k;
    weight_grad_channel(s, padded, drows, dweights + int64_t{o} * s.k * s.k);
    if (dimage != nullptr) image_grad_channel(s, w, drows, dplane);
  }
  if (dimage == nullptr) return;
  for (int y = 0; y < s.h; ++y) {
    std::memcpy(dimage + int64_t{y} * s.w, dplane + int64_t{y + s.pad} * s.pw + s.pad,
                sizeof(float) * s.w);
  }
}

}  // namespace dltune::engine
