#include "engine/ops/conv3x3.h"

#include <cstring>

#include "engine/ops/conv3x3_kernels.h"
#include "engine/ops/vec.h"

// The geometry: where each tap reads, how the weights are packed, which phases a stride-2
// layer's input gradient has. The loops themselves are in conv3x3_kernels.cc.

namespace dltune::engine {
namespace {

using conv3x3_detail::Correlation;
using conv3x3_detail::Sink;

constexpr int kLanes = 16;
constexpr int kTile = 8;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// The forward tap (ki, kj)'s read, relative to origin + q within one input channel's padded
// block: at stride 1, pixel (y + ki - 1, x + kj - 1) of the one plane; at stride 2, input
// (2y + ki - 1, 2x + kj - 1): row phase odd unless ki = 1, one row up when ki = 0; likewise
// for columns.
int64_t forward_offset(const Conv3x3Shape& s, int ki, int kj) {
  if (s.stride == 1) return int64_t{ki - 1} * s.pw + (kj - 1);
  const int phase = (ki == 1 ? 0 : 2) + (kj == 1 ? 0 : 1);
  return phase * s.plane + (ki == 0 ? -s.pw : 0) + (kj == 0 ? -1 : 0);
}

// The column it shifts to: x - 1, x or x + 1 (of its phase at stride 2).
int forward_shift(const Conv3x3Shape& s, int kj) {
  if (s.stride == 1) return kj - 1;
  return kj == 0 ? -1 : 0;
}

void forward_offsets(const Conv3x3Shape& s, int64_t* off) {
  for (int t = 0; t < 9; ++t) off[t] = forward_offset(s, t / 3, t % 3);
}

// A correlation's taps: the weight each applies (ki * 3 + kj), its read and its column shift.
// On a tight shape they are sorted by shift (left, none, right: the kernels' order).
struct TapList {
  int count = 0;
  int tap[9] = {};
  int64_t off[9] = {};
  int shift[9] = {};

  void add(int t, int64_t o, int sh) {
    tap[count] = t, off[count] = o, shift[count] = sh;
    ++count;
  }
  TapList in_kernel_order(const Conv3x3Shape& s) const {
    if (!s.tight) return *this;
    TapList sorted;
    for (int want = -1; want <= 1; ++want)
      for (int i = 0; i < count; ++i)
        if (shift[i] == want) sorted.add(tap[i], off[i], shift[i]);
    return sorted;
  }
};

TapList forward_taps(const Conv3x3Shape& s) {
  TapList l;
  for (int t = 0; t < 9; ++t) l.add(t, forward_offset(s, t / 3, t % 3), forward_shift(s, t % 3));
  return l.in_kernel_order(s);
}

// The taps reaching input phase p (2 pr + pc) of a stride-2 convolution, as reads of the
// output gradient: input (2i + pr, 2j + pc) gets W[ki, kj] dout (i + di, j + dj) for
// 2 (i + di) + ki - 1 = 2i + pr, i.e. ki = 1 (di = 0) for an even row, ki = 0 (di = 1) or
// ki = 2 (di = 0) for an odd one; columns alike.
struct PhaseTaps {
  int count;
  int tap[4];  // ki * 3 + kj
  int di[4], dj[4];
};
constexpr PhaseTaps kPhaseTaps[4] = {
    {1, {4}, {0}, {0}},                             // even row, even column
    {2, {3, 5}, {0, 0}, {1, 0}},                    // even row, odd column
    {2, {1, 7}, {1, 0}, {0, 0}},                    // odd row, even column
    {4, {0, 2, 6, 8}, {1, 1, 0, 0}, {1, 0, 1, 0}},  // odd row, odd column
};

// The input gradient's taps: at stride 1 (phase 0) W[., ., ki, kj] of the transpose reads pixel
// (y + 1 - ki, x + 1 - kj); at stride 2 phase p's.
TapList grad_taps(const Conv3x3Shape& s, int phase) {
  TapList l;
  if (s.stride == 1) {
    for (int t = 0; t < 9; ++t) l.add(t, -forward_offset(s, t / 3, t % 3), 1 - t % 3);
  } else {
    const PhaseTaps& p = kPhaseTaps[phase];
    for (int i = 0; i < p.count; ++i) l.add(p.tap[i], int64_t{p.di[i]} * s.pw + p.dj[i], p.dj[i]);
  }
  return l.in_kernel_order(s);
}

Correlation correlation(const Conv3x3Shape& s, const TapList& l, const float* packed, int cin,
                        int cout8, int64_t channel) {
  Correlation k;
  k.packed = packed;
  k.cin = cin;
  k.cout8 = cout8;
  k.channel = channel;
  k.taps = l.count;
  for (int i = 0; i < l.count; ++i) {
    k.off[i] = l.off[i];
    if (s.tight) k.left += l.shift[i] < 0 ? 1 : 0, k.right += l.shift[i] > 0 ? 1 : 0;
  }
  return k;
}

// Packs W (oc, c, 3, 3) taps l.tap as (cout8/8, cin, count, 8), `transpose` swapping the
// roles of c and oc.
void pack_taps(const Conv3x3Shape& s, const float* w, bool transpose, const TapList& l,
               float* dst) {
  const int cin = transpose ? s.oc : s.c, cout8 = transpose ? s.c8 : s.oc8;
  const int cout = transpose ? s.c : s.oc;
  std::memset(dst, 0, sizeof(float) * cout8 * cin * l.count);
  for (int co = 0; co < cout; ++co) {
    for (int ci = 0; ci < cin; ++ci) {
      const int o = transpose ? ci : co, c = transpose ? co : ci;
      const float* k = w + (int64_t{o} * s.c + c) * 9;
      float* d = dst + ((int64_t{co / kTile} * cin + ci) * l.count) * kTile + co % kTile;
      for (int t = 0; t < l.count; ++t) d[t * kTile] = k[l.tap[t]];
    }
  }
}

}  // namespace

bool Conv3x3Shape::init(int in_channels, int out_channels, int in_h, int in_w, int conv_stride) {
  if (in_channels < 1 || out_channels < 1 || in_h < 1 || in_w < 1) return false;
  if (conv_stride != 1 && conv_stride != 2) return false;
  c = in_channels, oc = out_channels, h = in_h, w = in_w, stride = conv_stride;
  oh = (h - 1) / stride + 1;
  ow = (w - 1) / stride + 1;
  // Tight: rows of whole vectors, none thrown away; otherwise one zero column between rows
  // (the right padding of a row is the left of the next).
  tight = ow <= kLanes && kLanes % ow == 0 && (int64_t{oh} * ow) % kLanes == 0;
  pw = tight ? ow : ow + 1;
  phases = stride == 1 ? 1 : 4;
  span = int64_t{oh} * pw;
  span16 = round_up(span, kLanes);
  origin = round_up(pw + 1, kLanes);
  // Reads reach origin + q + pw + 1 + 15 for q < span16 in vectors of 16 (the stride-1 taps,
  // the stride-2 input gradient's), and origin - pw - 1 at the least.
  plane = round_up(origin + span16 + pw + 1, kLanes);
  oc8 = static_cast<int>(round_up(oc, kTile));
  c8 = static_cast<int>(round_up(c, kTile));
  return true;
}

bool conv3x3_fast() { return cpu_has_avx512() || (cpu_features().avx2 && cpu_features().fma); }

void conv3x3_pack(const Conv3x3Shape& s, const float* w, float* packed) {
  pack_taps(s, w, false, forward_taps(s), packed);
  float* bwd = packed + int64_t{s.oc8} * s.c * 9;
  for (int p = 0; p < (s.stride == 1 ? 1 : 4); ++p) {
    const TapList l = grad_taps(s, p);
    pack_taps(s, w, true, l, bwd);
    bwd += int64_t{s.c8} * s.oc * l.count;
  }
}

void conv3x3_pad_input(const Conv3x3Shape& s, const float* src, int count, float* dst) {
  for (int n = 0; n < count; ++n) {
    const float* img = src + int64_t{n} * s.h * s.w;
    float* block = dst + int64_t{n} * s.phases * s.plane;
    if (s.stride == 1) {
      conv3x3_detail::fill_plane(s, img, s.w, 1, s.h, s.w, block);
      continue;
    }
    for (int pr = 0; pr < 2; ++pr)
      for (int pc = 0; pc < 2; ++pc)
        conv3x3_detail::fill_plane(s, img + int64_t{pr} * s.w + pc, 2 * int64_t{s.w}, 2,
                                   (s.h - pr + 1) / 2, (s.w - pc + 1) / 2,
                                   block + (2 * pr + pc) * s.plane);
  }
}

void conv3x3_pad_grad(const Conv3x3Shape& s, const float* src, int count, float* dst) {
  for (int n = 0; n < count; ++n)
    conv3x3_detail::fill_plane(s, src + int64_t{n} * s.oh * s.ow, s.ow, 1, s.oh, s.ow,
                               dst + int64_t{n} * s.plane);
}

void conv3x3_forward(const Conv3x3Shape& s, const float* packed, const float* bias,
                     const float* padded_in, float* out) {
  const Correlation k =
      correlation(s, forward_taps(s), packed, s.c, s.oc8, int64_t{s.phases} * s.plane);
  conv3x3_detail::correlate(s, k, padded_in, Sink{out, s.oc, bias, false, s.oh, s.ow});
}

void conv3x3_input_grad(const Conv3x3Shape& s, const float* packed, const float* padded_dout,
                        float* scratch, float* din, bool accumulate) {
  const float* bwd = packed + int64_t{s.oc8} * s.c * 9;
  if (s.stride == 1) {
    const Correlation k = correlation(s, grad_taps(s, 0), bwd, s.oc, s.c8, s.plane);
    conv3x3_detail::correlate(s, k, padded_dout, Sink{din, s.c, nullptr, accumulate, s.h, s.w});
    return;
  }
  const int64_t phase = int64_t{s.c} * s.oh * s.ow;
  for (int p = 0; p < 4; ++p) {
    const TapList l = grad_taps(s, p);
    const Correlation k = correlation(s, l, bwd, s.oc, s.c8, s.plane);
    conv3x3_detail::correlate(s, k, padded_dout,
                              Sink{scratch + p * phase, s.c, nullptr, false, s.oh, s.ow});
    bwd += int64_t{s.c8} * s.oc * l.count;
  }
  conv3x3_detail::interleave_phases(s, scratch, din, accumulate);
}

void conv3x3_weight_grad(const Conv3x3Shape& s, const float* padded_in, const float* padded_dout,
                         int images, float* dw) {
  int64_t off[9];
  forward_offsets(s, off);
  conv3x3_detail::weight_grad(s, off, padded_in, padded_dout, images, dw);
}

}  // namespace dltune::engine
