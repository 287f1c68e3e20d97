// The inner kernels of engine/ops/conv3x3.h, which works out the geometry (padded planes,
// phases, tap offsets) and calls these. Each is compiled for AVX-512 and for the baseline, the
// two heavy ones also for AVX2 + FMA (conv3x3_avx2.cc), and runs the build engine/ops/vec.h's
// use_avx512_kernels() / use_avx2_kernels() pick.
#pragma once

#include <cstdint>

#include "engine/ops/conv3x3.h"

namespace dltune::engine::conv3x3_detail {

// One correlation: `cin` input channels, their padded blocks `channel` floats apart, each read
// at `taps` offsets from origin + q for flat output position q; weights packed
// (cout8/8, cin, taps, 8). On a tight shape (Conv3x3Shape::tight) the taps come sorted by the
// column they shift to: the first `left` read pixel (y', x - 1), whose lanes at x = 0 are
// zeroed (they read the end of the row before), the last `right` read (y', x + 1), zeroed at
// x = ow - 1; on a loose one left = right = 0. (left, taps - left - right, right) is one of
// (3, 3, 3), (3, 6, 0), (0, 1, 0), (0, 1, 1), (0, 2, 0), (0, 2, 2), (0, 4, 0), (0, 9, 0).
struct Correlation {
  const float* packed = nullptr;
  int cin = 0, cout8 = 0, taps = 0;
  int left = 0, right = 0;
  int64_t channel = 0;
  int64_t off[9] = {};
};

// Where a correlation's output channels go: out (count, h, w), = or += when accumulate, each
// channel plus bias[channel] when bias is not null; flat position q = y pw + x is pixel (y, x)
// when x < w and y < h, and is dropped otherwise, as are tile channels from `count` on (the
// zero padding to a multiple of 8).
struct Sink {
  float* out = nullptr;
  int count = 0;
  const float* bias = nullptr;
  bool accumulate = false;
  int h = 0, w = 0;
};

// sink <- the correlation k of `in` (its padded planes, pixel (0, 0) at in + s.origin) over the
// s.span16 flat positions of rows s.pw apart.
void correlate(const Conv3x3Shape& s, const Correlation& k, const float* in, const Sink& sink);

// dw (oc, c, 3, 3) += sum over images and flat positions q of dout (o, origin + q) *
// in (c, origin + q + tap_off[ki * 3 + kj]); padded_in (images, c, s.phases, s.plane),
// padded_dout (images, oc, s.plane), both zero wherever no pixel is. On a tight shape the
// taps kj = 0 (and kj = 2 at stride 1) shift a column and are masked as in Correlation.
void weight_grad(const Conv3x3Shape& s, const int64_t* tap_off, const float* padded_in,
                 const float* padded_dout, int images, float* dw);

// The AVX2 + FMA builds of correlate and weight_grad (conv3x3_avx2.cc), which those two call
// where use_avx2_kernels() and not use_avx512_kernels().
void correlate_avx2(const Conv3x3Shape& s, const Correlation& k, const float* in, const Sink& sink);
void weight_grad_avx2(const Conv3x3Shape& s, const int64_t* tap_off, const float* padded_in,
                      const float* padded_dout, int images, float* dw);

// dst (s.plane) <- zero, but pixel (i, j) at s.origin + i s.pw + j = src[i src_row + j step]
// for i < rows, j < cols (cols < s.pw; step 1 or 2).
void fill_plane(const Conv3x3Shape& s, const float* src, int64_t src_row, int step, int rows,
                int cols, float* dst);

// din (c, h, w) = (or += when accumulate) the four phases' gradients interleaved:
// pixel (2i + pr, 2j + pc) <- phases (2 pr + pc, c, oh, ow) at (i, j).
void interleave_phases(const Conv3x3Shape& s, const float* phases, float* din, bool accumulate);

}  // namespace dltune::engine::conv3x3_detail
