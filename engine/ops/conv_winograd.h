// Winograd convolution F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2016): 3x3, stride 1, padding 1, one group, the layers of the CIFAR ResNets and
// VGG, in 16 multiplications per 2x2 output tile and channel pair instead of 36.
//
// How: the output is cut into 2x2 tiles; tile (i, j) reads the 4x4 patch of the zero-padded
// input at rows 2i-1 .. 2i+2, columns 2j-1 .. 2j+2. With B, G and A the F(2, 3) matrices
//   V = B' d B (4x4, per input channel and tile),  U = G g G' (4x4, per weight),
//   Y = A' [ sum over c of U[oc, c] . V[c] ] A   (. elementwise),
// so each of the 16 positions xi of the 4x4 "Winograd domain" is one independent GEMM over
// channels: M[xi] (oc, tiles) = U[xi] (oc, c) x V[xi] (c, tiles). The transforms are additions
// only (B's and A's entries are 0 and +-1, G's 0, 1 and +-1/2), so in fp32 the result differs
// from the direct sum by a few units of rounding, not more.
//   input gradient: the same, on the output gradient with the weights flipped and transposed
//                   (the transposed convolution of a "same" one is a "same" one).
//   weight gradient: dU[xi] (oc, c) = sum over tiles of (A dY A')[xi] (oc, tiles) x
//                   V[xi] (c, tiles)', then dW = G' dU G: again 16 GEMMs, reducing over tiles.
// All three do 4/9 of the direct kernels' multiply-adds; the transforms stream each tile's 16
// values through memory, which is what they cost instead.
//
// Vectors run over tiles, 8 at a time (AVX2). A tile row has w/2 tiles plus one past the row's
// end, so that a plane's tiles are one flat sequence whose 4x4 patches sit at a fixed stride
// (the extra tile's outputs are dropped, its output gradient is zero): tiles (h/2) x (w/2 + 1).
// The input transform first splits a channel by the parity of its rows and columns, which puts
// every row and column of every tile's patch at a fixed offset from the tile's index. Images are
// processed in blocks sized so a block's V and M stay near the core's L2 cache; the weight
// gradient's blocks are larger (each of its GEMMs reduces over the block's tiles and ends in
// horizontal sums, which a block of one 16x16 image's 72 tiles left a third of the work).
//
// Built for AVX2 + FMA (x86-64-v3, which AVX-512 CPUs also run); winograd_runs() says whether
// this CPU can, and WinogradShape::init which shapes it takes.
#pragma once

#include <cstdint>

namespace dltune::engine {

struct WinogradShape {
  int c = 0, oc = 0, h = 0, w = 0;  // channels in / out, plane (input = output)
  int th = 0, tw = 0;               // tile rows h/2, tiles per row w/2 + 1 (one past the end)
  int64_t tiles = 0;                // per image: th * tw
  int64_t row = 0;                  // w + 2: a row of the output (gradient) staging
  int images = 0;                   // images per block of forward and the input gradient
  int wgrad_images = 0;             // images per block of the weight gradient (more: below)
  // Floats per (xi, channel) row of a block of `n` images: its tiles, padded.
  int64_t stride(int n) const;

  // Fills the derived fields; false for a shape it cannot take: h or w odd or below 2, or c or
  // oc not a multiple of 4.
  bool init(int in_channels, int out_channels, int in_h, int in_w);
  // Both directions' transformed weights (winograd_pack).
  int64_t packed_floats() const { return int64_t{32} * oc * c; }
  // Pieces winograd_pack_part packs: a block of 4 output channels of either direction.
  int pack_parts() const { return oc / 4 + c / 4; }
  // One thread's scratch for any of the three calls.
  int64_t scratch_floats() const;
  // Multiply-adds of one image's forward (the GEMMs only, tiles past the row end included).
  int64_t gemm_macs() const { return int64_t{16} * c * oc * tiles; }
};

// Whether this CPU runs the kernels (AVX2 and FMA, DLTUNE_KERNELS not "generic").
bool winograd_runs();

// packed (s.packed_floats()) <- U = G g G' of W (oc, c, 3, 3), forward (16, oc/4, c, 4), then
// of the flipped, transposed W for the input gradient (16, c/4, oc, 4).
void winograd_pack(const WinogradShape& s, const float* w, float* packed);
// The same for one of its s.pack_parts() pieces (each writes only its own floats: the pieces
// may run on different threads).
void winograd_pack_part(const WinogradShape& s, const float* w, int part, float* packed);

// out (images, oc, h, w) = (or += when accumulate) bias + the convolution of
// in (images, c, h, w); a null bias adds nothing. scratch: s.scratch_floats().
void winograd_forward(const WinogradShape& s, const float* packed, const float* bias,
                      const float* in, int images, float* out, bool accumulate, float* scratch);

// din (images, c, h, w) = (or += when accumulate) the input gradient for dout (images, oc, h, w).
void winograd_input_grad(const WinogradShape& s, const float* packed, const float* dout, int images,
                         float* din, bool accumulate, float* scratch);

// dw (oc, c, 3, 3) = (or += when accumulate) the weight gradient of `images` images of
// in (images, c, h, w) and dout (images, oc, h, w), summed in image order.
void winograd_weight_grad(const WinogradShape& s, const float* in, const float* dout, int images,
                          float* dw, bool accumulate, float* scratch);

}  // namespace dltune::engine
