// Direct 3x3 convolution, stride 1, padding 1 ("same"), one group: the convolutions of the
// CIFAR ResNets, ResNet-18/50's 3x3 layers and VGG, without im2col or GEMM.
//
// Why: with 16-64 channels, im2col + OpenBLAS spends more time building, packing and
// scattering columns (9x the image) than multiplying: on resnet20 (b64, one thread) the GEMMs'
// kernels were a quarter of the step and their copies, im2col and col2im another two fifths.
//
// How: every channel is copied into a zero-padded plane of (h + 2) rows of pw = w + 2 floats.
// Output pixel (y, x) is given the flat index q = y * pw + x; its tap (ki, kj) then reads the
// padded plane at q + ki * pw + kj, the same offset for every pixel. So each 3x3 convolution
// becomes nine shifted 1-D multiply-adds over the flat plane, vectorised 16 pixels at a time
// across row ends (the two columns per row where x >= w are computed and thrown away: 6 % of
// the work at w = 32, 20 % at w = 8). A register tile of 8 output channels x up to 3 vectors
// of 16 pixels (24 accumulators) loads each input vector once for 8 channels and each weight
// once (a broadcast) for 48 pixels.
//   forward:        out (oc, q)  = sum over c, taps of W[oc, c, tap] * in (c, q + off(tap))
//                   stored straight into out (oc, h, w), one masked store per output row a
//                   vector touches (the thrown-away columns are never written)
//   input gradient: the same kernel on the padded output gradient with W transposed (c <-> oc)
//                   and flipped (tap -> 8 - tap): the transposed convolution of a "same" one.
//   weight gradient: dW[oc, c, ki, kj] = sum over q of dout (oc, q) * in (c, q + off(ki, kj)),
//                   an 8 output channels x 3 taps tile of accumulators per (c, ki), summed
//                   over a group of images before one horizontal sum per weight.
// The padded output gradient doubles as the flat one the weight gradient reads (its zero
// right/left padding is exactly the thrown-away columns), so backward pads it once.
//
// The kernels are built for AVX-512 (x86-64-v4) and a baseline (GCC target_clones);
// conv3x3_fast() says whether this CPU runs the AVX-512 build, the only one worth choosing
// over im2col.
#pragma once

#include <algorithm>
#include <cstdint>

namespace dltune::engine {

struct Conv3x3Shape {
  int c = 0, oc = 0, h = 0, w = 0;  // channels in / out, image plane (= output plane)
  int pw = 0;                       // padded row: w + 2
  int64_t span = 0;                 // flat output positions: h * pw
  int64_t span16 = 0;               // span rounded up to 16 (the kernels' vector)
  int lead = 0;                     // zeros before each padded plane: the flat gradient aligned
  int64_t plane = 0;                // floats per padded plane (>= every read past its end)
  int oc8 = 0, c8 = 0;              // channels rounded up to 8 (the kernels' tile)

  // Fills the derived fields; false for a shape it cannot take (a dimension < 1).
  bool init(int in_channels, int out_channels, int in_h, int in_w);
  int64_t packed_floats() const { return (int64_t{oc8} * c + int64_t{c8} * oc) * 9; }
};

// Whether the CPU runs the AVX-512 kernels (otherwise im2col + GEMM is faster).
bool conv3x3_fast();

// packed_fwd (oc8/8, c, 9, 8) and packed_bwd (c8/8, oc, 9, 8) <- W (oc, c, 3, 3): the forward
// weights and the transposed, flipped ones of the input gradient, zero in the padded channels.
void conv3x3_pack(const Conv3x3Shape& s, const float* w, float* packed_fwd, float* packed_bwd);

// dst (count, s.plane) <- src (count, h, w): each plane zero-padded by one on every side
// (row r, column x of src at lead + (r + 1) * pw + x + 1), zeros before and after it.
void conv3x3_pad(const Conv3x3Shape& s, const float* src, int count, float* dst);

// One image: out (oc, h, w) = bias + the convolution of padded_in (c, s.plane); a null bias
// adds nothing.
void conv3x3_forward(const Conv3x3Shape& s, const float* packed_fwd, const float* bias,
                     const float* padded_in, float* out);

// One image: din (c, h, w) = (or += when accumulate) the gradient of the input for
// padded_dout (oc, s.plane), the output gradient padded by conv3x3_pad.
void conv3x3_input_grad(const Conv3x3Shape& s, const float* packed_bwd, const float* padded_dout,
                        float* din, bool accumulate);

// dw (oc, c, 3, 3) += the weight gradient of `images` images: padded_in (images, c, plane) and
// padded_dout (images, oc, plane), both from conv3x3_pad.
void conv3x3_weight_grad(const Conv3x3Shape& s, const float* padded_in, const float* padded_dout,
                         int images, float* dw);

}  // namespace dltune::engine
