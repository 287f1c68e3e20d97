#include "engine/ops/conv3x3.h"

#include <cstdlib>
#include <cstring>

#include "engine/ops/vec.h"

// Every kernel below is compiled twice, for AVX-512 (x86-64-v4) and for the baseline, and
// called through the build conv3x3_fast() says this CPU runs. The inner loops run over 16
// floats, one AVX-512 register each.
#define DLTUNE_AVX512 __attribute__((target("arch=x86-64-v4")))

namespace dltune::engine {
namespace {

constexpr int kLanes = 16;
constexpr int kTile = 8;  // output channels per register tile

typedef float v16 __attribute__((vector_size(64)));

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// flat (8, span16) rows [q0, q0 + 16 NV) <- 8 output channels of the correlation of `in`
// (cin padded planes) with wp (cin, 9, 8): 8 x NV accumulators, each input vector loaded once
// for the 8 channels, each weight broadcast once for the NV vectors.
template <int NV>
[[gnu::always_inline]] inline void correlate_tile(const float* wp, int cin, const float* in,
                                                  int64_t plane, int pw, int64_t q0, float* flat,
                                                  int64_t span16) {
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
  for (int o = 0; o < kTile; ++o)
    for (int j = 0; j < NV; ++j) vstore(flat + o * span16 + q0 + j * kLanes, acc[o][j]);
}

// flat (cout8, span16) <- the correlation of `in` (cin planes) with packed (cout8/8, cin, 9, 8).
[[gnu::always_inline]] inline void correlate(const Conv3x3Shape& s, const float* packed, int cin,
                                             int cout8, const float* in, float* flat) {
  const int64_t vectors = s.span16 / kLanes;
  for (int64_t v = 0; v < vectors; v += 3) {
    const int64_t q0 = v * kLanes, left = vectors - v;
    for (int ob = 0; ob < cout8 / kTile; ++ob) {
      const float* wp = packed + int64_t{ob} * cin * 9 * kTile;
      float* f = flat + int64_t{ob} * kTile * s.span16;
      if (left >= 3) {
        correlate_tile<3>(wp, cin, in, s.plane, s.pw, q0, f, s.span16);
      } else if (left == 2) {
        correlate_tile<2>(wp, cin, in, s.plane, s.pw, q0, f, s.span16);
      } else {
        correlate_tile<1>(wp, cin, in, s.plane, s.pw, q0, f, s.span16);
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
                                    const float* in, float* flat) {
  correlate(s, packed, cin, cout8, in, flat);
}

void correlate_generic(const Conv3x3Shape& s, const float* packed, int cin, int cout8,
                       const float* in, float* flat) {
  correlate(s, packed, cin, cout8, in, flat);
}

DLTUNE_AVX512 void weight_grad_avx512(const Conv3x3Shape& s, const float* padded_in,
                                      const float* padded_dout, int images, float* dw) {
  weight_grad<true>(s, padded_in, padded_dout, images, dw);
}

void weight_grad_generic(const Conv3x3Shape& s, const float* padded_in, const float* padded_dout,
                         int images, float* dw) {
  weight_grad<false>(s, padded_in, padded_dout, images, dw);
}

// The AVX-512 build where the CPU has it, unless DLTUNE_CONV3X3_GENERIC is set (the tests run
// the baseline build that way too).
bool avx512() {
  static const bool use =
      conv3x3_fast() && std::getenv("DLTUNE_CONV3X3_GENERIC") == nullptr;  // NOLINT: read once
  return use;
}

void run_correlate(const Conv3x3Shape& s, const float* packed, int cin, int cout8, const float* in,
                   float* flat) {
  if (avx512()) return correlate_avx512(s, packed, cin, cout8, in, flat);
  correlate_generic(s, packed, cin, cout8, in, flat);
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

bool conv3x3_fast() {
  static const bool fast = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  }();
  return fast;
}

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

void conv3x3_forward(const Conv3x3Shape& s, const float* packed_fwd, const float* bias,
                     const float* padded_in, float* flat, float* out) {
  run_correlate(s, packed_fwd, s.c, s.oc8, padded_in + s.lead, flat);
  for (int o = 0; o < s.oc; ++o) {
    const float b = bias != nullptr ? bias[o] : 0.0f;
    for (int y = 0; y < s.h; ++y) {
      const float* src = flat + o * s.span16 + int64_t{y} * s.pw;
      float* dst = out + (int64_t{o} * s.h + y) * s.w;
      for (int x = 0; x < s.w; ++x) dst[x] = src[x] + b;
    }
  }
}

void conv3x3_input_grad(const Conv3x3Shape& s, const float* packed_bwd, const float* padded_dout,
                        float* flat, float* din, bool accumulate) {
  run_correlate(s, packed_bwd, s.oc, s.c8, padded_dout + s.lead, flat);
  for (int c = 0; c < s.c; ++c) {
    for (int y = 0; y < s.h; ++y) {
      const float* src = flat + c * s.span16 + int64_t{y} * s.pw;
      float* dst = din + (int64_t{c} * s.h + y) * s.w;
      if (accumulate) {
        for (int x = 0; x < s.w; ++x) dst[x] += src[x];
      } else {
        std::memcpy(dst, src, sizeof(float) * s.w);
      }
    }
  }
}

void conv3x3_weight_grad(const Conv3x3Shape& s, const float* padded_in, const float* padded_dout,
                         int images, float* dw) {
  if (avx512()) return weight_grad_avx512(s, padded_in, padded_dout, images, dw);
  weight_grad_generic(s, padded_in, padded_dout, images, dw);
}

}  // namespace dltune::engine
