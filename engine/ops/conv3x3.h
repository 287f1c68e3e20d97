// Direct 3x3 convolution, padding 1, stride 1 ("same") or 2, one group: the convolutions of
// the CIFAR ResNets, ResNet-18/50's 3x3 layers and VGG, without im2col or GEMM.
//
// Why: with 16-64 channels, im2col + OpenBLAS spends more time building, packing and
// scattering columns (9x the image) than multiplying: on resnet20 (b64, one thread) the GEMMs'
// kernels were a quarter of the step and their copies, im2col and col2im another two fifths.
//
// How (stride 1): every channel is copied into a zero-padded plane whose rows are pw = w + 1
// floats apart, pixel (y, x) at origin + y pw + x (the zero between two rows pads both).
// Output pixel (y, x) is given the flat index q = y * pw + x; its tap (ki, kj) then reads the
// plane at origin + q + (ki - 1) pw + (kj - 1), the same offset for every pixel. So each 3x3
// convolution becomes nine shifted 1-D multiply-adds over the flat plane, vectorised 16 pixels
// at a time across row ends (the column x = w is computed and never stored: 3 % of the work at
// w = 32, 11 % at w = 8).
// A register tile of 8 output channels x up to 3 vectors of 16 pixels (24 accumulators) loads
// each input vector once for 8 channels and each weight once (a broadcast) for 48 pixels, and
// stores straight into the output tensor, one masked store per output row a vector touches.
//   forward:        out (oc, q)  = sum over c, taps of W[oc, c, tap] * in (c, q + off(tap))
//   input gradient: the same kernel on the padded output gradient with W transposed (c <-> oc)
//                   and the offsets negated: the transposed convolution of a "same" one.
//   weight gradient: dW[oc, c, ki, kj] = sum over q of dout (oc, q) * in (c, q + off(ki, kj)),
//                   an 8 output channels x 3 taps tile of accumulators per (c, ki), summed
//                   over a group of images before one horizontal sum per weight.
// The padded output gradient doubles as the flat one the weight gradient reads: its zeros are
// exactly the never-stored columns.
//
// Planes at most 16 wide whose width divides 16 (resnet20's 16x16 and 8x8 stages) are "tight":
// rows ow apart with no zero between them, so no work is thrown away (the zero column was 6 %
// of it at ow = 16, 11 % at 8, and 8x8's 72 flat positions took 5 vectors for 4 vectors of
// pixels); every vector then holds whole rows, and the lanes of a tap that would read across a
// row end (x = 0 reading x - 1, x = ow - 1 reading x + 1) are zeroed by a mask that is the
// same for every vector.
//
// Stride 2 splits each input channel into its four phases (even/odd rows x even/odd columns),
// each a padded plane of rows pw apart (ow + 1, or ow when tight): tap (ki, kj) of output
// (y, x) reads input (2y + ki - 1, 2x + kj - 1), which is pixel (y + dy, x + dx) of one phase,
// dy, dx in {-1, 0}: again one flat offset per tap (into that phase's plane), and the same
// kernels run. The input
// gradient of each phase is a correlation of the output gradient with the taps that reach it
// (1, 2, 2 and 4 of the 9), interleaved into the input gradient afterwards.
//
// The kernels are built for AVX-512 (x86-64-v4), AVX2 + FMA (x86-64-v3: conv3x3_avx2.cc, with
// register tiles cut to sixteen 8-float registers) and a baseline (engine/ops/vec.h);
// conv3x3_fast() says whether this CPU runs one of the first two, the builds worth choosing
// over im2col.
#pragma once

#include <algorithm>
#include <cstdint>

namespace dltune::engine {

struct Conv3x3Shape {
  int c = 0, oc = 0, h = 0, w = 0;  // channels in / out, input plane
  int stride = 1;                   // 1 or 2
  int oh = 0, ow = 0;               // output plane
  bool tight = false;               // rows without a zero between them (below)
  int pw = 0;                       // padded row: ow, or ow + 1 when not tight
  int64_t span = 0;                 // flat output positions: oh * pw
  int64_t span16 = 0;               // span rounded up to 16 (the kernels' vector)
  int64_t origin = 0;               // where pixel (0, 0) sits in a padded plane (64-byte aligned)
  int64_t plane = 0;                // floats per padded plane (>= every read past its end)
  int phases = 1;                   // padded planes per input channel: 1, or 4 at stride 2
  int oc8 = 0, c8 = 0;              // channels rounded up to 8 (the kernels' tile)

  // Fills the derived fields; false for a shape it cannot take (a dimension < 1, a stride
  // other than 1 and 2).
  bool init(int in_channels, int out_channels, int in_h, int in_w, int conv_stride = 1);
  // Packed weights of both directions (conv3x3_pack).
  int64_t packed_floats() const { return (int64_t{oc8} * c + int64_t{c8} * oc) * 9; }
  // One image's padded input and padded output gradient.
  int64_t padded_in_floats() const { return int64_t{c} * phases * plane; }
  int64_t padded_dout_floats() const { return int64_t{oc} * plane; }
  // Scratch conv3x3_input_grad needs (the phases' gradients at stride 2; none at stride 1).
  int64_t grad_scratch_floats() const { return stride == 1 ? 0 : int64_t{4} * c * oh * ow; }
};

// Whether the CPU runs the AVX-512 or the AVX2 kernels (otherwise im2col + GEMM is faster).
bool conv3x3_fast();

// Images whose weight gradient the kernel sums in registers before its horizontal sums: enough
// for 64 vectors of 16 outputs (16 % of a 3-wide row of taps at most), at most `batch`.
inline int conv3x3_group(const Conv3x3Shape& s, int batch) {
  const int64_t vectors = std::max<int64_t>(1, s.span16 / 16);
  return static_cast<int>(std::clamp<int64_t>((64 + vectors - 1) / vectors, 1, std::max(batch, 1)));
}

// packed (s.packed_floats()) <- W (oc, c, 3, 3): the forward weights (oc8/8, c, 9, 8), then
// the input gradient's, transposed (c8/8, oc, taps, 8): all nine at stride 1, the four
// phases' taps in turn at stride 2. Zero in the padded channels.
void conv3x3_pack(const Conv3x3Shape& s, const float* w, float* packed);

// dst (count, s.phases, s.plane) <- src (count, h, w): each input channel's padded plane (its
// four phases' at stride 2).
void conv3x3_pad_input(const Conv3x3Shape& s, const float* src, int count, float* dst);

// dst (count, s.plane) <- src (count, oh, ow): each output-gradient channel's padded plane.
void conv3x3_pad_grad(const Conv3x3Shape& s, const float* src, int count, float* dst);

// One image: out (oc, oh, ow) = bias + the convolution of padded_in (c, phases, plane); a null
// bias adds nothing.
void conv3x3_forward(const Conv3x3Shape& s, const float* packed, const float* bias,
                     const float* padded_in, float* out);

// One image: din (c, h, w) = (or += when accumulate) the gradient of the input for
// padded_dout (oc, plane) from conv3x3_pad_grad. scratch: s.grad_scratch_floats().
void conv3x3_input_grad(const Conv3x3Shape& s, const float* packed, const float* padded_dout,
                        float* scratch, float* din, bool accumulate);

// dw (oc, c, 3, 3) += the weight gradient of `images` images: padded_in (images, c, phases,
// plane) and padded_dout (images, oc, plane).
void conv3x3_weight_grad(const Conv3x3Shape& s, const float* padded_in, const float* padded_dout,
                         int images, float* dw);

}  // namespace dltune::engine
