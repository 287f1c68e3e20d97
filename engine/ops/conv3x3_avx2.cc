// The AVX2 + FMA build of engine/ops/conv3x3_kernels.h's two inner kernels (correlate and
// weight_grad), for CPUs without AVX-512 (this project's AMD Zen 3).
//
// The geometry is the AVX-512 one (engine/ops/conv3x3.h: flat positions in vectors of 16,
// tight planes whose 16-lane vectors each start a row); the register tiles are cut to AVX2's
// sixteen 8-float registers:
//   correlate:   4 output channels (half of the packed 8-channel tile) x 3 vectors of 8 flat
//                positions: 12 accumulators; per input channel and tap, 3 loads and 4 weight
//                broadcasts feed 12 fused multiply-adds.
//   weight_grad: 4 output channels x the 3 taps of a kernel row: 12 accumulators over every
//                image of the group and 8 positions at a time, 3 input loads and 4 output-
//                gradient loads per 12 multiply-adds.
// An 8-position vector at flat position q is the (q / 8) % 2 half of its 16-lane vector, so the
// row masks of a tight shape (conv3x3_kernels.cc's RowMasks) apply half by half. A vector whose
// lanes are all pixels of one output row is stored with plain moves; one that spans a row's end
// (loose shapes) through AVX's masked moves, which touch no memory in the lanes they leave out.
#include <algorithm>

#include <immintrin.h>

#include "engine/ops/conv3x3_kernels.h"
#include "engine/ops/vec.h"

namespace dltune::engine::conv3x3_detail {
namespace {

constexpr int kLanes = 16;  // the geometry's vector
constexpr int kV = 8;       // an AVX2 register
constexpr int kPacked = 8;  // channels per packed tile (conv3x3_pack)
constexpr int kTile = 4;    // output channels per register tile

typedef float v8 __attribute__((vector_size(32)));
typedef int i8 __attribute__((vector_size(32)));

// Lanes whose pixel has a left (x > 0) and a right (x < ow - 1) neighbour in its row, for the
// two halves of a 16-lane vector; all on for a loose shape.
struct HalfMasks {
  i8 left[2], right[2];
};

HalfMasks half_masks(const Conv3x3Shape& s) {
  HalfMasks m;
  for (int l = 0; l < kLanes; ++l) {
    m.left[l / kV][l % kV] = !s.tight || l % s.ow != 0 ? -1 : 0;
    m.right[l / kV][l % kV] = !s.tight || l % s.ow != s.ow - 1 ? -1 : 0;
  }
  return m;
}

template <int kShift>
[[gnu::always_inline]] inline v8 masked(v8 x, const HalfMasks& m, int half) {
  if constexpr (kShift < 0) return m.left[half] != 0 ? x : v8{};
  if constexpr (kShift > 0) return m.right[half] != 0 ? x : v8{};
  return x;
}

// channel[at + i] = (or +=) v[i] for lo <= i < hi: AVX's masked load and store.
DLTUNE_AVX2 [[gnu::always_inline]] inline void store_lanes(float* channel, int64_t at, v8 v, int lo,
                                                           int hi, bool accumulate) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_and_si256(_mm256_cmpgt_epi32(iota, _mm256_set1_epi32(lo - 1)),
                                        _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), iota));
  float* dst = reinterpret_cast<float*>(reinterpret_cast<intptr_t>(channel) +
                                        at * static_cast<intptr_t>(sizeof(float)));
  __m256 x = reinterpret_cast<__m256>(v);
  if (accumulate) x = _mm256_add_ps(x, _mm256_maskload_ps(dst, mask));
  _mm256_maskstore_ps(dst, mask, x);
}

// channel[at .. at + 8) = (or +=) v: a whole vector's pixels, with plain moves (AVX's masked
// store is microcoded on AMD's Zen cores, about a dozen cycles each; on resnet20 the masked
// stores of every vector took a sixth of this kernel's time).
DLTUNE_AVX2 [[gnu::always_inline]] inline void store_vector(float* channel, int64_t at, v8 v,
                                                            bool accumulate) {
  float* dst = channel + at;
  __m256 x = reinterpret_cast<__m256>(v);
  if (accumulate) x = _mm256_add_ps(x, _mm256_loadu_ps(dst));
  _mm256_storeu_ps(dst, x);
}

// acc[o][j] += w[o] * the NV vectors at p (vector j being half (h0 + j) % 2 of its 16 lanes)
template <int NV, int kShift>
[[gnu::always_inline]] inline void tap_fma(v8 (&acc)[kTile][3], const float* p, const float* w,
                                           const HalfMasks& m, int h0) {
  v8 x[NV];
  for (int j = 0; j < NV; ++j) x[j] = masked<kShift>(vload<v8>(p + j * kV), m, (h0 + j) % 2);
  for (int o = 0; o < kTile; ++o) {
    const float wv = w[o];
    for (int j = 0; j < NV; ++j) acc[o][j] += wv * x[j];
  }
}

// Output channels first .. first + 3 (those below sink.count) x NV vectors of 8 flat positions
// from q0, of correlation k; `wp` points at the channels' packed weights.
template <int NV>
DLTUNE_AVX2 [[gnu::always_inline]] inline void tile(const Conv3x3Shape& s, const Correlation& k,
                                                    const HalfMasks& m, const float* wp,
                                                    const float* in, int64_t q0, const Sink& sink,
                                                    int first) {
  const int NL = k.left, T = k.taps, NR = k.right, N0 = T - NL - NR;
  const int h0 = static_cast<int>((q0 / kV) % 2);
  v8 acc[kTile][3];
  for (int o = 0; o < kTile; ++o)
    for (int j = 0; j < 3; ++j) acc[o][j] = v8{};
  for (int ci = 0; ci < k.cin; ++ci) {
    const float* src = in + ci * k.channel + q0;
    const float* wc = wp + ci * T * kPacked;
    int t = 0;
    for (; t < NL; ++t) tap_fma<NV, -1>(acc, src + k.off[t], wc + t * kPacked, m, h0);
    for (; t < NL + N0; ++t) tap_fma<NV, 0>(acc, src + k.off[t], wc + t * kPacked, m, h0);
    for (; t < T; ++t) tap_fma<NV, 1>(acc, src + k.off[t], wc + t * kPacked, m, h0);
  }
  const int channels = std::min(kTile, sink.count - first);
  const int64_t hw = int64_t{sink.h} * sink.w, skip = s.pw - sink.w;
  for (int j = 0; j < NV; ++j) {
    const int64_t qv = q0 + j * kV;
    // The vector's pixels: one segment on a tight shape (whole rows, all of them pixels), else
    // a segment per output row it touches.
    int64_t y = skip == 0 ? 0 : qv / s.pw;
    const int64_t y_end = skip == 0 ? 1 : sink.h;
    for (; y < y_end && (skip == 0 || y * s.pw < qv + kV); ++y) {
      const int lo = skip == 0 ? 0 : static_cast<int>(std::max<int64_t>(0, y * s.pw - qv));
      const int hi =
          skip == 0 ? kV : static_cast<int>(std::min<int64_t>(kV, y * s.pw + sink.w - qv));
      if (hi <= lo) continue;
      const int64_t at = qv - y * skip;
      // Every lane a pixel of this row (all of them on a tight shape): plain stores.
      const bool whole = lo == 0 && hi == kV;
      for (int o = 0; o < channels; ++o) {
        v8 v = acc[o][j];
        if (sink.bias != nullptr) v += sink.bias[first + o];
        if (whole) {
          store_vector(sink.out + (first + o) * hw, at, v, sink.accumulate);
        } else {
          store_lanes(sink.out + (first + o) * hw, at, v, lo, hi, sink.accumulate);
        }
      }
    }
  }
}

// dw[o][kj] (4 output channels' taps (ki, 0..2) of one input channel, rows `ostride` apart) +=
// sum over the images and flat positions of dout (o, q) * x[kj] (q).
template <int OB, int kShift0, int kShift2>
DLTUNE_AVX2 [[gnu::always_inline]] inline void wgrad_tile(const float* const* x, int64_t in_image,
                                                          const float* dout, int64_t dout_image,
                                                          int64_t plane, int images, int64_t span16,
                                                          const HalfMasks& m, float* dw,
                                                          int64_t ostride) {
  v8 acc[OB][3];
  for (int o = 0; o < OB; ++o) acc[o][0] = acc[o][1] = acc[o][2] = v8{};
  for (int n = 0; n < images; ++n) {
    const float* p0 = x[0] + n * in_image;
    const float* p1 = x[1] + n * in_image;
    const float* p2 = x[2] + n * in_image;
    const float* d = dout + n * dout_image;
    for (int64_t q = 0; q < span16; q += kV) {
      const int h = static_cast<int>((q / kV) % 2);
      const v8 x0 = masked<kShift0>(vload<v8>(p0 + q), m, h), x1 = vload<v8>(p1 + q),
               x2 = masked<kShift2>(vload<v8>(p2 + q), m, h);
      for (int o = 0; o < OB; ++o) {
        const v8 dv = vload<v8>(d + o * plane + q);
        acc[o][0] += dv * x0;
        acc[o][1] += dv * x1;
        acc[o][2] += dv * x2;
      }
    }
  }
  for (int o = 0; o < OB; ++o) {
    for (int kj = 0; kj < 3; ++kj) {
      float sum = 0.0f;
      for (int i = 0; i < kV; ++i) sum += acc[o][kj][i];
      dw[o * ostride + kj] += sum;
    }
  }
}

template <int kShift0, int kShift2>
DLTUNE_AVX2 void wgrad_shifts(const Conv3x3Shape& s, const int64_t* tap_off, const float* padded_in,
                              const float* padded_dout, int images, float* dw) {
  const HalfMasks m = half_masks(s);
  const int64_t block = int64_t{s.phases} * s.plane;  // one input channel
  const int64_t in_image = s.c * block, dout_image = int64_t{s.oc} * s.plane;
  const float* dflat = padded_dout + s.origin;
  const int64_t ostride = int64_t{s.c} * 9;
  for (int o0 = 0; o0 < s.oc;) {
    const int left = s.oc - o0;
    const int ob = left >= 4 ? 4 : left >= 2 ? 2 : 1;
    for (int c = 0; c < s.c; ++c) {
      for (int ki = 0; ki < 3; ++ki) {
        const float* base = padded_in + c * block + s.origin;
        const float* x[3] = {base + tap_off[ki * 3], base + tap_off[ki * 3 + 1],
                             base + tap_off[ki * 3 + 2]};
        const float* d = dflat + int64_t{o0} * s.plane;
        float* w = dw + o0 * ostride + c * 9 + ki * 3;
        if (ob == 4) {
          wgrad_tile<4, kShift0, kShift2>(x, in_image, d, dout_image, s.plane, images, s.span16, m,
                                          w, ostride);
        } else if (ob == 2) {
          wgrad_tile<2, kShift0, kShift2>(x, in_image, d, dout_image, s.plane, images, s.span16, m,
                                          w, ostride);
        } else {
          wgrad_tile<1, kShift0, kShift2>(x, in_image, d, dout_image, s.plane, images, s.span16, m,
                                          w, ostride);
        }
      }
    }
    o0 += ob;
  }
}

}  // namespace

DLTUNE_AVX2 void correlate_avx2(const Conv3x3Shape& s, const Correlation& k, const float* in,
                                const Sink& sink) {
  const HalfMasks m = half_masks(s);
  const int64_t vectors = s.span16 / kV;
  in += s.origin;
  for (int64_t v = 0; v < vectors;) {
    const int64_t left = vectors - v;
    const int nv = left >= 3 ? 3 : static_cast<int>(left);
    const int64_t q0 = v * kV;
    for (int ob = 0; ob < k.cout8 / kPacked; ++ob) {
      const float* wp = k.packed + int64_t{ob} * k.cin * k.taps * kPacked;
      for (int half = 0; half < 2; ++half) {
        const int first = ob * kPacked + half * kTile;
        if (first >= sink.count) break;
        if (nv == 3) {
          tile<3>(s, k, m, wp + half * kTile, in, q0, sink, first);
        } else if (nv == 2) {
          tile<2>(s, k, m, wp + half * kTile, in, q0, sink, first);
        } else {
          tile<1>(s, k, m, wp + half * kTile, in, q0, sink, first);
        }
      }
    }
    v += nv;
  }
}

DLTUNE_AVX2 void weight_grad_avx2(const Conv3x3Shape& s, const int64_t* tap_off,
                                  const float* padded_in, const float* padded_dout, int images,
                                  float* dw) {
  if (!s.tight) return wgrad_shifts<0, 0>(s, tap_off, padded_in, padded_dout, images, dw);
  if (s.stride == 1) return wgrad_shifts<-1, 1>(s, tap_off, padded_in, padded_dout, images, dw);
  wgrad_shifts<-1, 0>(s, tap_off, padded_in, padded_dout, images, dw);
}

}  // namespace dltune::engine::conv3x3_detail
