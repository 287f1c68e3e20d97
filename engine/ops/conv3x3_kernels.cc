#include "engine/ops/conv3x3_kernels.h"

#include <algorithm>
#include <cstring>

#include <immintrin.h>

#include "common/check.h"
#include "engine/ops/vec.h"

// The inner loops run over 16 floats, one AVX-512 register each; the baseline build runs the
// same code on GCC's lowering of 64-byte vectors (slow, but exact: the tests run it).

namespace dltune::engine::conv3x3_detail {
namespace {

constexpr int kLanes = 16;
constexpr int kTile = 8;  // output channels per register tile

typedef float v16 __attribute__((vector_size(64)));
typedef int i16 __attribute__((vector_size(64)));

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

// Lane masks of a tight shape (all lanes on for a loose one): lanes whose pixel has a left
// neighbour in its row (x > 0), and a right one (x < ow - 1). Every vector starts a row there.
struct RowMasks {
  i16 left, right;
};

RowMasks row_masks(const Conv3x3Shape& s) {
  RowMasks m;
  for (int l = 0; l < kLanes; ++l) {
    m.left[l] = !s.tight || l % s.ow != 0 ? -1 : 0;
    m.right[l] = !s.tight || l % s.ow != s.ow - 1 ? -1 : 0;
  }
  return m;
}

// Zeroes the lanes a column-shifting read must not see: kShift -1 (reads x - 1), 0, +1.
template <int kShift>
[[gnu::always_inline]] inline v16 masked(v16 x, const RowMasks& m) {
  if constexpr (kShift < 0) return m.left != 0 ? x : v16{};
  if constexpr (kShift > 0) return m.right != 0 ? x : v16{};
  return x;
}

// acc[o][j] += wt[o] * the NV vectors at p (masked for a column shift kShift)
template <int NV, int kShift>
[[gnu::always_inline]] inline void tap_fma(v16 (&acc)[kTile][NV], const float* p, const float* wt,
                                           const RowMasks& m) {
  v16 x[NV];
  for (int j = 0; j < NV; ++j) x[j] = masked<kShift>(vload<v16>(p + j * kLanes), m);
  for (int o = 0; o < kTile; ++o) {
    const float wv = wt[o];
    for (int j = 0; j < NV; ++j) acc[o][j] += wv * x[j];
  }
}

// 8 output channels x NV vectors of flat positions q0.. of correlation k (NL taps shifting
// left, N0 none, NR right), written to the sink's channels from `first`: 8 x NV accumulators,
// each input vector loaded once for the 8 channels, each weight broadcast once for the NV
// vectors. A loose shape's vector spans at most ceil(16 / pw) + 1 output rows, each stored
// with one masked store; a tight one's is stored whole.
template <int NV, class Split, bool kZmm>
[[gnu::always_inline]] inline void correlate_tile(const Conv3x3Shape& s, const Correlation& k,
                                                  const Split& sp, const RowMasks& m,
                                                  const float* wp, const float* in, int64_t q0,
                                                  const Sink& sink, int first) {
  const int NL = sp.left, N0 = sp.mid, T = sp.left + sp.mid + sp.right;
  int64_t off[9];
  for (int t = 0; t < T; ++t) off[t] = k.off[t];
  v16 acc[kTile][NV];
  for (int o = 0; o < kTile; ++o)
    for (int j = 0; j < NV; ++j) acc[o][j] = v16{};
  for (int ci = 0; ci < k.cin; ++ci) {
    const float* src = in + ci * k.channel + q0;
    const float* wc = wp + ci * T * kTile;
    // Unrolled: every tap's offset a constant displacement, as the loop over ki, kj was.
#pragma GCC unroll 9
    for (int t = 0; t < NL; ++t) tap_fma<NV, -1>(acc, src + off[t], wc + t * kTile, m);
#pragma GCC unroll 9
    for (int t = NL; t < NL + N0; ++t) tap_fma<NV, 0>(acc, src + off[t], wc + t * kTile, m);
#pragma GCC unroll 9
    for (int t = NL + N0; t < T; ++t) tap_fma<NV, 1>(acc, src + off[t], wc + t * kTile, m);
  }
  const int channels = std::min(kTile, sink.count - first);
  const int64_t hw = int64_t{sink.h} * sink.w, skip = s.pw - sink.w;
  for (int j = 0; j < NV; ++j) {
    const int64_t qv = q0 + j * kLanes;
    const auto store = [&](int64_t at, int lo, int hi) {
      for (int o = 0; o < channels; ++o) {
        v16 v = acc[o][j];
        if (sink.bias != nullptr) v += sink.bias[first + o];
        float* channel = sink.out + (first + o) * hw;
        if constexpr (kZmm) {
          store_row_lanes_avx512(channel, at, v, lo, hi, sink.accumulate);
        } else {
          store_row_lanes_generic(channel, at, v, lo, hi, sink.accumulate);
        }
      }
    };
    if (skip == 0) {  // tight: whole rows, all of them pixels (span is a multiple of 16)
      store(qv, 0, kLanes);
      continue;
    }
    for (int64_t y = qv / s.pw; y < sink.h && y * s.pw < qv + kLanes; ++y) {
      const int lo = static_cast<int>(std::max<int64_t>(0, y * s.pw - qv));
      const int hi = static_cast<int>(std::min<int64_t>(kLanes, y * s.pw + sink.w - qv));
      if (hi > lo) store(qv - y * skip, lo, hi);
    }
  }
}

// How a correlation's taps divide by column shift: fixed (the AVX-512 build: every tap loop
// unrolled, each split its own instantiation) or read at run time (the baseline build, which
// only the tests and CPUs without AVX-512 run: its eight fixed splits made this file take
// 95-140 s to compile here, 58 s without them).
template <int NL, int N0, int NR>
struct FixedSplit {
  static constexpr int left = NL, mid = N0, right = NR;
};
struct RuntimeSplit {
  int left, mid, right;
};

template <class Split, bool kZmm>
[[gnu::always_inline]] inline void correlate_taps(const Conv3x3Shape& s, const Correlation& k,
                                                  const float* in, const Sink& sink,
                                                  const Split& sp) {
  const int T = sp.left + sp.mid + sp.right;
  const RowMasks m = row_masks(s);
  const int64_t vectors = s.span16 / kLanes;
  in += s.origin;
  for (int64_t v = 0; v < vectors;) {
    // Tiles of 3 vectors, the last 1 or 2 (at 8x8, 3 + 1 measured faster than 2 + 2:
    // 11.5 against 12.8 ms for resnet20's last stage forward, b64).
    const int64_t left = vectors - v;
    const int nv = left >= 3 ? 3 : static_cast<int>(left);
    const int64_t q0 = v * kLanes;
    for (int ob = 0; ob < k.cout8 / kTile; ++ob) {
      const float* wp = k.packed + int64_t{ob} * k.cin * T * kTile;
      if (nv == 3) {
        correlate_tile<3, Split, kZmm>(s, k, sp, m, wp, in, q0, sink, ob * kTile);
      } else if (nv == 2) {
        correlate_tile<2, Split, kZmm>(s, k, sp, m, wp, in, q0, sink, ob * kTile);
      } else {
        correlate_tile<1, Split, kZmm>(s, k, sp, m, wp, in, q0, sink, ob * kTile);
      }
    }
    v += nv;
  }
}

// Runs correlate_taps with the first of Splits that divides k's taps as k does; false if none.
template <bool kZmm, class... Splits>
[[gnu::always_inline]] inline bool correlate_fixed(const Conv3x3Shape& s, const Correlation& k,
                                                   const float* in, const Sink& sink) {
  const int mid = k.taps - k.left - k.right;
  return ((Splits::left == k.left && Splits::mid == mid && Splits::right == k.right &&
           (correlate_taps<Splits, kZmm>(s, k, in, sink, Splits{}), true)) ||
          ...);
}

template <bool kZmm>
[[gnu::always_inline]] inline void correlate_any(const Conv3x3Shape& s, const Correlation& k,
                                                 const float* in, const Sink& sink) {
  if constexpr (!kZmm) {
    const RuntimeSplit sp{k.left, k.taps - k.left - k.right, k.right};
    return correlate_taps<RuntimeSplit, kZmm>(s, k, in, sink, sp);
  }
  // Correlation's list of splits: tight stride 1, tight stride-2 forward, loose 9 taps, and the
  // stride-2 input gradient's phases, loose and tight.
  const bool ran =
      correlate_fixed<kZmm, FixedSplit<3, 3, 3>, FixedSplit<3, 6, 0>, FixedSplit<0, 9, 0>,
                      FixedSplit<0, 4, 0>, FixedSplit<0, 2, 2>, FixedSplit<0, 2, 0>,
                      FixedSplit<0, 1, 1>, FixedSplit<0, 1, 0>>(s, k, in, sink);
  DLTUNE_CHECK(ran, "conv3x3: no kernel for this tap split");
}

// dw[o][kj] (OB output channels' taps (ki, 0..2) of one input channel, rows `ostride` apart)
// += sum over the images and flat positions of dout (o, q) * x[kj] (q): OB x 3 accumulators
// over every image of the group, then one horizontal sum each.
template <int OB, int kShift0, int kShift2, bool kZmm>
[[gnu::always_inline]] inline void weight_grad_tile(const float* const* x, int64_t in_image,
                                                    const float* dout, int64_t dout_image,
                                                    int64_t plane, int images, int64_t span16,
                                                    const RowMasks& m, float* dw, int64_t ostride) {
  v16 acc[OB][3];
  for (int o = 0; o < OB; ++o) acc[o][0] = acc[o][1] = acc[o][2] = v16{};
  for (int n = 0; n < images; ++n) {
    const float* p0 = x[0] + n * in_image;
    const float* p1 = x[1] + n * in_image;
    const float* p2 = x[2] + n * in_image;
    const float* d = dout + n * dout_image;
    for (int64_t q = 0; q < span16; q += kLanes) {
      const v16 x0 = masked<kShift0>(vload<v16>(p0 + q), m), x1 = vload<v16>(p1 + q),
                x2 = masked<kShift2>(vload<v16>(p2 + q), m);
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

// The tiles of every (8 output channels, input channel, ki): the columns kj = 0 and 2 shift
// by kShift0 and kShift2 (a tight shape's; 0 for a loose one).
template <int kShift0, int kShift2, bool kZmm>
[[gnu::always_inline]] inline void weight_grad_shifts(const Conv3x3Shape& s, const int64_t* tap_off,
                                                      const float* padded_in,
                                                      const float* padded_dout, int images,
                                                      float* dw) {
  const RowMasks m = row_masks(s);
  const int64_t block = int64_t{s.phases} * s.plane;  // one input channel
  const int64_t in_image = s.c * block, dout_image = int64_t{s.oc} * s.plane;
  const float* dflat = padded_dout + s.origin;  // 64-byte aligned
  const int64_t ostride = int64_t{s.c} * 9;
  for (int o0 = 0; o0 < s.oc;) {
    const int left = s.oc - o0;
    const int ob = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    for (int c = 0; c < s.c; ++c) {
      for (int ki = 0; ki < 3; ++ki) {
        const float* base = padded_in + c * block + s.origin;
        const float* x[3] = {base + tap_off[ki * 3], base + tap_off[ki * 3 + 1],
                             base + tap_off[ki * 3 + 2]};
        const float* d = dflat + int64_t{o0} * s.plane;
        float* w = dw + o0 * ostride + c * 9 + ki * 3;
        switch (ob) {
          case 8:
            weight_grad_tile<8, kShift0, kShift2, kZmm>(x, in_image, d, dout_image, s.plane, images,
                                                        s.span16, m, w, ostride);
            break;
          case 4:
            weight_grad_tile<4, kShift0, kShift2, kZmm>(x, in_image, d, dout_image, s.plane, images,
                                                        s.span16, m, w, ostride);
            break;
          case 2:
            weight_grad_tile<2, kShift0, kShift2, kZmm>(x, in_image, d, dout_image, s.plane, images,
                                                        s.span16, m, w, ostride);
            break;
          default:
            weight_grad_tile<1, kShift0, kShift2, kZmm>(x, in_image, d, dout_image, s.plane, images,
                                                        s.span16, m, w, ostride);
        }
      }
    }
    o0 += ob;
  }
}

template <bool kZmm>
[[gnu::always_inline]] inline void weight_grad_any(const Conv3x3Shape& s, const int64_t* tap_off,
                                                   const float* padded_in, const float* padded_dout,
                                                   int images, float* dw) {
  if (!s.tight)
    return weight_grad_shifts<0, 0, kZmm>(s, tap_off, padded_in, padded_dout, images, dw);
  if (s.stride == 1) {  // taps kj = 0, 1, 2 read x - 1, x, x + 1
    return weight_grad_shifts<-1, 1, kZmm>(s, tap_off, padded_in, padded_dout, images, dw);
  }
  // stride 2: kj = 0 reads the odd phase at x - 1, kj = 1 and 2 a phase at x
  weight_grad_shifts<-1, 0, kZmm>(s, tap_off, padded_in, padded_dout, images, dw);
}

// Plain loops, vectorised by the compiler for each build (-O3). Rows are short (8-32 floats):
// a memcpy call per row cost more than the copy.
template <int kStep>
[[gnu::always_inline]] inline void fill_plane_step(const Conv3x3Shape& s, const float* src,
                                                   int64_t src_row, int rows, int cols,
                                                   float* dst) {
  std::fill(dst, dst + s.origin, 0.0f);
  for (int i = 0; i < rows; ++i) {
    float* row = dst + s.origin + int64_t{i} * s.pw;
    const float* in = src + i * src_row;
    for (int j = 0; j < cols; ++j) row[j] = in[j * kStep];
    for (int j = cols; j < s.pw; ++j) row[j] = 0.0f;
  }
  std::fill(dst + s.origin + int64_t{rows} * s.pw, dst + s.plane, 0.0f);
}

[[gnu::always_inline]] inline void fill_plane_any(const Conv3x3Shape& s, const float* src,
                                                  int64_t src_row, int step, int rows, int cols,
                                                  float* dst) {
  if (step == 1) return fill_plane_step<1>(s, src, src_row, rows, cols, dst);
  fill_plane_step<2>(s, src, src_row, rows, cols, dst);
}

[[gnu::always_inline]] inline void interleave_any(const Conv3x3Shape& s, const float* phases,
                                                  float* din, bool accumulate) {
  const int64_t phase = int64_t{s.c} * s.oh * s.ow;
  for (int c = 0; c < s.c; ++c) {
    for (int r = 0; r < s.h; ++r) {
      const int64_t at = (int64_t{c} * s.oh + r / 2) * s.ow;
      const float* even = phases + (r % 2) * 2 * phase + at;  // columns 0, 2, ...
      const float* odd = even + phase;                        // columns 1, 3, ...
      float* d = din + (int64_t{c} * s.h + r) * s.w;
      const int pairs = s.w / 2;
      if (accumulate) {
        for (int j = 0; j < pairs; ++j) {
          d[2 * j] += even[j];
          d[2 * j + 1] += odd[j];
        }
        if (s.w % 2 != 0) d[s.w - 1] += even[pairs];
      } else {
        for (int j = 0; j < pairs; ++j) {
          d[2 * j] = even[j];
          d[2 * j + 1] = odd[j];
        }
        if (s.w % 2 != 0) d[s.w - 1] = even[pairs];
      }
    }
  }
}

// The two builds of each kernel.
DLTUNE_AVX512 void correlate_avx512(const Conv3x3Shape& s, const Correlation& k, const float* in,
                                    const Sink& sink) {
  correlate_any<true>(s, k, in, sink);
}
void correlate_generic(const Conv3x3Shape& s, const Correlation& k, const float* in,
                       const Sink& sink) {
  correlate_any<false>(s, k, in, sink);
}
DLTUNE_AVX512 void weight_grad_avx512(const Conv3x3Shape& s, const int64_t* tap_off,
                                      const float* padded_in, const float* padded_dout, int images,
                                      float* dw) {
  weight_grad_any<true>(s, tap_off, padded_in, padded_dout, images, dw);
}
void weight_grad_generic(const Conv3x3Shape& s, const int64_t* tap_off, const float* padded_in,
                         const float* padded_dout, int images, float* dw) {
  weight_grad_any<false>(s, tap_off, padded_in, padded_dout, images, dw);
}
DLTUNE_AVX512 void fill_plane_avx512(const Conv3x3Shape& s, const float* src, int64_t src_row,
                                     int step, int rows, int cols, float* dst) {
  fill_plane_any(s, src, src_row, step, rows, cols, dst);
}
void fill_plane_generic(const Conv3x3Shape& s, const float* src, int64_t src_row, int step,
                        int rows, int cols, float* dst) {
  fill_plane_any(s, src, src_row, step, rows, cols, dst);
}
DLTUNE_AVX512 void interleave_avx512(const Conv3x3Shape& s, const float* phases, float* din,
                                     bool accumulate) {
  interleave_any(s, phases, din, accumulate);
}
void interleave_generic(const Conv3x3Shape& s, const float* phases, float* din, bool accumulate) {
  interleave_any(s, phases, din, accumulate);
}

}  // namespace

void correlate(const Conv3x3Shape& s, const Correlation& k, const float* in, const Sink& sink) {
  if (use_avx512_kernels()) return correlate_avx512(s, k, in, sink);
  if (use_avx2_kernels()) return correlate_avx2(s, k, in, sink);
  correlate_generic(s, k, in, sink);
}

void weight_grad(const Conv3x3Shape& s, const int64_t* tap_off, const float* padded_in,
                 const float* padded_dout, int images, float* dw) {
  if (use_avx512_kernels())
    return weight_grad_avx512(s, tap_off, padded_in, padded_dout, images, dw);
  if (use_avx2_kernels()) return weight_grad_avx2(s, tap_off, padded_in, padded_dout, images, dw);
  weight_grad_generic(s, tap_off, padded_in, padded_dout, images, dw);
}

void fill_plane(const Conv3x3Shape& s, const float* src, int64_t src_row, int step, int rows,
                int cols, float* dst) {
  if (use_avx512_kernels()) return fill_plane_avx512(s, src, src_row, step, rows, cols, dst);
  fill_plane_generic(s, src, src_row, step, rows, cols, dst);
}

void interleave_phases(const Conv3x3Shape& s, const float* phases, float* din, bool accumulate) {
  if (use_avx512_kernels()) return interleave_avx512(s, phases, din, accumulate);
  interleave_generic(s, phases, din, accumulate);
}

}  // namespace dltune::engine::conv3x3_detail
