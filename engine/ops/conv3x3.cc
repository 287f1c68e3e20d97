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

void forward_offsets(const Conv3x3Shape& s, int64_t* off) {
  for (int t = 0; t < 9; ++t) off[t] = forward_offset(s, t / 3, t % 3);
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

// Packs W (oc, c, 3, 3) taps `taps` (count of them) as (cout8/8, cin, count, 8), `transpose`
// swapping the roles of c and oc.
void pack_taps(const Conv3x3Shape& s, const float* w, bool transpose, const int* taps, int count,
               float* dst) {
  const int cin = transpose ? s.oc : s.c, cout8 = transpose ? s.c8 : s.oc8;
  const int cout = transpose ? s.c : s.oc;
  std::memset(dst, 0, sizeof(float) * cout8 * cin * count);
  for (int co = 0; co < cout; ++co) {
    for (int ci = 0; ci < cin; ++ci) {
      const int o = transpose ? ci : co, c = transpose ? co : ci;
      const float* k = w + (int64_t{o} * s.c + c) * 9;
      float* d = dst + ((int64_t{co / kTile} * cin + ci) * count) * kTile + co % kTile;
      for (int t = 0; t < count; ++t) d[t * kTile] = k[taps[t]];
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
  pw = ow + 1;  // one zero column: the right padding of a row is the left of the next
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

bool conv3x3_fast() { return cpu_has_avx512(); }

void conv3x3_pack(const Conv3x3Shape& s, const float* w, float* packed) {
  static constexpr int kAll[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  pack_taps(s, w, false, kAll, 9, packed);
  float* bwd = packed + int64_t{s.oc8} * s.c * 9;
  if (s.stride == 1) return pack_taps(s, w, true, kAll, 9, bwd);
  for (const PhaseTaps& p : kPhaseTaps) {
    pack_taps(s, w, true, p.tap, p.count, bwd);
    bwd += int64_t{s.c8} * s.oc * p.count;
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
  Correlation k;
  k.packed = packed;
  k.cin = s.c;
  k.cout8 = s.oc8;
  k.taps = 9;
  k.channel = int64_t{s.phases} * s.plane;
  forward_offsets(s, k.off);
  conv3x3_detail::correlate(s, k, padded_in, Sink{out, s.oc, bias, false, s.oh, s.ow});
}

void conv3x3_input_grad(const Conv3x3Shape& s, const float* packed, const float* padded_dout,
                        float* scratch, float* din, bool accumulate) {
  Correlation k;
  k.cin = s.oc;
  k.cout8 = s.c8;
  k.channel = s.plane;
  k.packed = packed + int64_t{s.oc8} * s.c * 9;
  if (s.stride == 1) {  // W[., ., ki, kj] of the transpose reads pixel (y + 1 - ki, x + 1 - kj)
    k.taps = 9;
    for (int t = 0; t < 9; ++t) k.off[t] = -forward_offset(s, t / 3, t % 3);
    conv3x3_detail::correlate(s, k, padded_dout, Sink{din, s.c, nullptr, accumulate, s.h, s.w});
    return;
  }
  const int64_t phase = int64_t{s.c} * s.oh * s.ow;
  for (int p = 0; p < 4; ++p) {
    const PhaseTaps& pt = kPhaseTaps[p];
    k.taps = pt.count;
    for (int t = 0; t < pt.count; ++t) k.off[t] = int64_t{pt.di[t]} * s.pw + pt.dj[t];
    conv3x3_detail::correlate(s, k, padded_dout,
                              Sink{scratch + p * phase, s.c, nullptr, false, s.oh, s.ow});
    k.packed += int64_t{s.c8} * s.oc * pt.count;
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
