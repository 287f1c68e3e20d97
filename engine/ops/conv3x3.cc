#include "engine/ops/conv3x3.h"

#include <cstdlib>
#include <cstring>

#include <immintrin.h>

#include "engine/ops/vec.h"

// Every kernel below is compiled twice, for AVX-512 (x86-64-v4) and for the baseline, and
// called through the build use_avx512_kernels() picks (engine/ops/vec.h). The inner loops run
// over 16 floats, one AVX-512 register each.

namespace dltune::engine {
namespace {

constexpr int kLanes = 16;
constexpr int kTile = 8;  // output channels per register tile

typedef float v16 __attribute__((vector_size(64)));

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Where correlate() puts its output channels: out (count, h, w) (= or += when accumulate), each
// channel plus bias[channel] when bias is not null. Tile channels from `count` on (the zero
// padding to a multiple of 8) are dropped.
struct Sink {
  float* out;
  int count;
  const float* bias;
  bool accumulate;
};

// The lanes lo <= i < hi of v, a vector of flat positions q.. that fall in one output row:
// channel[at + i] = (or += when accumulate) v[i]. One masked load and store: the lanes they
// leave out touch no memory (`at` alone may be negative, at + lo is not).
DLTUNE_AVX512 void store_row_lanes_avx512(float* channel, int64_t at, v16 v, int lo, int hi,
                                          bool accumulate) {
  const auto mask = static_cast<__mmask16>(((1u << hi) - 1u) & ~((1u << lo) - 1u));
  float* dst = reinterpret_cast<float*>(reinterpret_cast<intptr_t>(channel) +
                                        at * static_cast<intptr_t>(sizeof(float)));
  __m512 x = reinterpret_cast<__m512>(v);
  if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask, dst));
  _mm512_mask_storeu_ps(dst, mask, x);
}

void store_row_lanes_generic(float* channel, int64_t at, v16 v, int lo, int hi, bool accumulate) {
  for (int i = lo; i < hi; ++i) {
    float& d = channel[at + i];
    d = accumulate ? d + v[i] : v[i];
  }
}

// 8 output channels x NV vectors of flat positions q0.. of the correlation of `in` (cin padded
// planes) with wp (cin, 9, 8), written to the sink's channels from `first`: 8 x NV accumulators,
// each input vector loaded once for the 8 channels, each weight broadcast once for the NV
// vectors. Flat position q = y pw + x is output pixel (y, x) when x < w and y < h; each vector
// spans at most ceil(16 / pw) + 1 output rows, each stored with one masked store.
template <int NV, bool kZmm>
[[gnu::always_inline]] inline void correlate_tile(const Conv3x3Shape& s, const float* wp, int cin,
                                                  const float* in, int64_t q0, const Sink& sink,
                                                  int first) {
  const int64_t plane = s.plane;
  const int pw = s.pw;
  v16 acc[kTile][NV];
  for (int o = 0; o < kTile; ++o)
    for (int j = 0; j < NV; ++j) acc[o][j] = v16{};
  for (int ci = 0; ci < cin; ++ci) {
    const float* src = in + ci * plane + q0;
    const float* wc = wp + ci * 9 * kTile;
    for (int ki = 0; ki < 3; ++ki) {
      for (int kj = 0; kj < 3; ++kj) {
        const float* p = src + ki * pw + kj;
        v16 x[NV];
        for (int j = 0; j < NV; ++j) x[j] = vload<v16>(p + j * kLanes);
        const float* wt = wc + (ki * 3 + kj) * kTile;
        for (int o = 0; o < kTile; ++o) {
          const float wv = wt[o];
          for (int j = 0; j < NV; ++j) acc[o][j] += wv * x[j];
        }
      }
    }
  }
  const int channels = std::min(kTile, sink.count - first);
  const int64_t hw = int64_t{s.h} * s.w;
  for (int j = 0; j < NV; ++j) {
    const int64_t qv = q0 + j * kLanes;
    for (int64_t y = qv / pw; y < s.h && y * pw < qv + kLanes; ++y) {
      const int lo = static_cast<int>(std::max<int64_t>(0, y * pw - qv));
      const int hi = static_cast<int>(std::min<int64_t>(kLanes, y * pw + s.w - qv));
      if (hi <= lo) continue;
      for (int o = 0; o < channels; ++o) {
        v16 v = acc[o][j];
        if (sink.bias != nullptr) v += sink.bias[first + o];
        float* channel = sink.out + (first + o) * hw;
        if constexpr (kZmm) {
          store_row_lanes_avx512(channel, qv - 2 * y, v, lo, hi, sink.accumulate);
        } else {
          store_row_lanes_generic(channel, qv - 2 * y, v, lo, hi, sink.accumulate);
        }
      }
    }
  }
}

// sink <- the correlation of `in` (cin planes) with packed (cout8/8, cin, 9, 8).
template <bool kZmm>
[[gnu::always_inline]] inline void correlate(const Conv3x3Shape& s, const float* packed, int cin,
                                             int cout8, const float* in, const Sink& sink) {
  const int64_t vectors = s.span16 / kLanes;
  for (int64_t v = 0; v < vectors; v += 3) {
    const int64_t q0 = v * kLanes, left = vectors - v;
    for (int ob = 0; ob < cout8 / kTile; ++ob) {
      const float* wp = packed + int64_t{ob} * cin * 9 * kTile;
      if (left >= 3) {
        correlate_tile<3, kZmm>(s, wp, cin, in, q0, sink, ob * kTile);
      } else if (left == 2) {
        correlate_tile<2, kZmm>(s, wp, cin, in, q0, sink, ob * kTile);
      } else {
        correlate_tile<1, kZmm>(s, wp, cin, in, q0, sink, ob * kTile);
      }
    }
  }
}

// dw[o][kj] (OB output channels' taps (ki, 0..2) of one input channel, rows `ostride` apart)
// += sum over the images and flat positions of dout (o, q) * in (q + kj): OB x 3 accumulators
// over every image of the group, then one horizontal sum each.
template <int OB, bool kZmm>
[[gnu::always_inline]] inline void weight_grad_tile(const float* in, int64_t in_image,
                                                    const float* dout, int64_t dout_image,
                                                    int64_t plane, int images, int64_t span16,
                                                    float* dw, int64_t ostride) {
  v16 acc[OB][3];
  for (int o = 0; o < OB; ++o) acc[o][0] = acc[o][1] = acc[o][2] = v16{};
  for (int n = 0; n < images; ++n) {
    const float* x = in + n * in_image;
    const float* d = dout + n * dout_image;
    for (int64_t q = 0; q < span16; q += kLanes) {
      const v16 x0 = vload<v16>(x + q), x1 = vload<v16>(x + q + 1), x2 = vload<v16>(x + q + 2);
      for (int o = 0; o < OB; ++o) {
        v16 dv = vload<v16>(d + o * plane + q);
        // One load for the three taps: left alone, GCC folds it into each multiply-add, three
        // loads per vector, and the loop waits on loads rather than multiply-adds.
#if defined(__GNUC__) && !defined(__clang__)  // clang checks the constraint in the generic build
        if constexpr (kZmm) asm("" : "+v"(dv));
#endif
        acc[o][0] += dv * x0;
        acc[o][1] += dv * x1;
        acc[o][2] += dv * x2;
      }
    }
  }
  for (int o = 0; o < OB; ++o) {
    for (int kj = 0; kj < 3; ++kj) {
      float sum = 0.0f;
      for (int i = 0; i < kLanes; ++i) sum += acc[o][kj][i];
      dw[o * ostride + kj] += sum;
    }
  }
}

template <bool kZmm>
[[gnu::always_inline]] inline void weight_grad(const Conv3x3Shape& s, const float* padded_in,
                                               const float* padded_dout, int images, float* dw) {
  const int64_t in_image = int64_t{s.c} * s.plane, dout_image = int64_t{s.oc} * s.plane;
  // dout (o, q) at its flat index q: 64-byte aligned (the lead)
  const float* dflat = padded_dout + s.lead + s.pw + 1;
  const int64_t ostride = int64_t{s.c} * 9;
  for (int o0 = 0; o0 < s.oc;) {
    const int left = s.oc - o0;
    const int ob = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    for (int c = 0; c < s.c; ++c) {
      for (int ki = 0; ki < 3; ++ki) {
        const float* x = padded_in + s.lead + int64_t{c} * s.plane + int64_t{ki} * s.pw;
        const float* d = dflat + int64_t{o0} * s.plane;
        float* w = dw + o0 * ostride + c * 9 + ki * 3;
        switch (ob) {
          case 8:
            weight_grad_tile<8, kZmm>(x, in_image, d, dout_image, s.plane, images, s.span16, w,
                                      ostride);
            break;
          case 4:
            weight_grad_tile<4, kZmm>(x, in_image, d, dout_image, s.plane, images, s.span16, w,
                                      ostride);
            break;
          case 2:
            weight_grad_tile<2, kZmm>(x, in_image, d, dout_image, s.plane, images, s.span16, w,
                                      ostride);
            break;
          default:
            weight_grad_tile<1, kZmm>(x, in_image, d, dout_image, s.plane, images, s.span16, w,
                                      ostride);
        }
      }
    }
    o0 += ob;
  }
}

DLTUNE_AVX512 void correlate_avx512(const Conv3x3Shape& s, const float* packed, int cin, int cout8,
                                    const float* in, const Sink& sink) {
  correlate<true>(s, packed, cin, cout8, in, sink);
}

void correlate_generic(const Conv3x3Shape& s, const float* packed, int cin, int cout8,
                       const float* in, const Sink& sink) {
  correlate<false>(s, packed, cin, cout8, in, sink);
}

DLTUNE_AVX512 void weight_grad_avx512(const Conv3x3Shape& s, const float* padded_in,
                                      const float* padded_dout, int images, float* dw) {
  weight_grad<true>(s, padded_in, padded_dout, images, dw);
}

void weight_grad_generic(const Conv3x3Shape& s, const float* padded_in, const float* padded_dout,
                         int images, float* dw) {
  weight_grad<false>(s, padded_in, padded_dout, images, dw);
}

// conv3x3_pad's two builds. Rows are short (8-32 floats): a memcpy call per row cost more than
// the copy, so the AVX-512 build copies 16 floats per masked load and store, the row's last
// store carrying the two zeros of its right and the next row's left padding.
DLTUNE_AVX512 void zero_avx512(float* p, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) _mm512_storeu_ps(p + i, _mm512_setzero_ps());
  if (i < n)
    _mm512_mask_storeu_ps(p + i, static_cast<__mmask16>((1u << (n - i)) - 1u), _mm512_setzero_ps());
}

DLTUNE_AVX512 void pad_avx512(const Conv3x3Shape& s, const float* src, int count, float* dst) {
  const int64_t head = s.lead + s.pw + 1, used = s.lead + int64_t{s.h + 1} * s.pw + 1;
  for (int i = 0; i < count; ++i) {
    float* p = dst + int64_t{i} * s.plane;
    const float* img = src + int64_t{i} * s.h * s.w;
    zero_avx512(p, head);
    for (int y = 0; y < s.h; ++y) {
      float* row = p + head + int64_t{y} * s.pw;
      const float* in = img + int64_t{y} * s.w;
      int x = 0;
      for (; x + kLanes <= s.w; x += kLanes) _mm512_storeu_ps(row + x, _mm512_loadu_ps(in + x));
      const int r = s.w - x;  // 0..15 floats left, then the two zeros
      const __m512 v = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << r) - 1u), in + x);
      const int lanes = std::min(r + 2, kLanes);
      _mm512_mask_storeu_ps(row + x, static_cast<__mmask16>((1u << lanes) - 1u), v);
      if (r + 2 > kLanes) row[s.w + 1] = 0.0f;
    }
    zero_avx512(p + used, s.plane - used);
  }
}

void pad_generic(const Conv3x3Shape& s, const float* src, int count, float* dst) {
  for (int i = 0; i < count; ++i) {
    float* p = dst + int64_t{i} * s.plane + s.lead;
    const float* img = src + int64_t{i} * s.h * s.w;
    std::memset(p - s.lead, 0, sizeof(float) * (s.lead + s.pw + 1));
    for (int y = 0; y < s.h; ++y) {
      float* row = p + int64_t{y + 1} * s.pw + 1;
      std::memcpy(row, img + int64_t{y} * s.w, sizeof(float) * s.w);
      row[s.w] = row[s.w + 1] = 0.0f;  // right pad, next row's left pad
    }
    const int64_t used = int64_t{s.h + 1} * s.pw + 1;
    std::memset(p + used, 0, sizeof(float) * (s.plane - s.lead - used));
  }
}

void run_correlate(const Conv3x3Shape& s, const float* packed, int cin, int cout8, const float* in,
                   const Sink& sink) {
  if (use_avx512_kernels()) return correlate_avx512(s, packed, cin, cout8, in, sink);
  correlate_generic(s, packed, cin, cout8, in, sink);
}

}  // namespace

bool Conv3x3Shape::init(int in_channels, int out_channels, int in_h, int in_w) {
  if (in_channels < 1 || out_channels < 1 || in_h < 1 || in_w < 1) return false;
  c = in_channels, oc = out_channels, h = in_h, w = in_w;
  pw = w + 2;
  span = int64_t{h} * pw;
  span16 = round_up(span, kLanes);
  lead = static_cast<int>((kLanes - (pw + 1) % kLanes) % kLanes);
  // Reads reach lead + q + 2 pw + 2 for q < span16 (taps), and lead + pw + 1 + span16 (the
  // flat gradient).
  plane = round_up(lead + span16 + 2 * int64_t{pw} + 2, kLanes);
  oc8 = static_cast<int>(round_up(oc, kTile));
  c8 = static_cast<int>(round_up(c, kTile));
  return true;
}

bool conv3x3_fast() { return cpu_has_avx512(); }

void conv3x3_pack(const Conv3x3Shape& s, const float* w, float* packed_fwd, float* packed_bwd) {
  std::memset(packed_fwd, 0, sizeof(float) * s.oc8 * s.c * 9);
  std::memset(packed_bwd, 0, sizeof(float) * s.c8 * s.oc * 9);
  for (int o = 0; o < s.oc; ++o) {
    for (int c = 0; c < s.c; ++c) {
      const float* k = w + (int64_t{o} * s.c + c) * 9;
      float* f = packed_fwd + ((int64_t{o / kTile} * s.c + c) * 9) * kTile + o % kTile;
      float* b = packed_bwd + ((int64_t{c / kTile} * s.oc + o) * 9) * kTile + c % kTile;
      for (int t = 0; t < 9; ++t) {
        f[t * kTile] = k[t];
        b[t * kTile] = k[8 - t];  // flipped: tap (ki, kj) of the transpose is (2-ki, 2-kj)
      }
    }
  }
}

void conv3x3_pad(const Conv3x3Shape& s, const float* src, int count, float* dst) {
  if (use_avx512_kernels()) return pad_avx512(s, src, count, dst);
  pad_generic(s, src, count, dst);
}

void conv3x3_forward(const Conv3x3Shape& s, const float* packed_fwd, const float* bias,
                     const float* padded_in, float* out) {
  run_correlate(s, packed_fwd, s.c, s.oc8, padded_in + s.lead, Sink{out, s.oc, bias, false});
}

void conv3x3_input_grad(const Conv3x3Shape& s, const float* packed_bwd, const float* padded_dout,
                        float* din, bool accumulate) {
  run_correlate(s, packed_bwd, s.oc, s.c8, padded_dout + s.lead,
                Sink{din, s.c, nullptr, accumulate});
}

void conv3x3_weight_grad(const Conv3x3Shape& s, const float* padded_in, const float* padded_dout,
                         int images, float* dw) {
  if (use_avx512_kernels()) return weight_grad_avx512(s, padded_in, padded_dout, images, dw);
  weight_grad_generic(s, padded_in, padded_dout, images, dw);
}

}  // namespace dltune::engine
