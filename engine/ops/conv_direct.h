// Direct convolution for a single input channel with stride 1 (the first layer of LeNet and
// LeNet-5), per image, without im2col.
//
// Why: with one input channel im2col turns a 5x5 convolution into a GEMM with K = 25 and M =
// the output channels (6 or 20): OpenBLAS spends as long packing the 25-row column matrix as
// multiplying it, and the columns are 25 times the image. Here the image is copied once into a
// zero-padded plane that stays in L1 and every output row is accumulated over the K*K taps in
// registers, 8 pixels at a time, several accumulators at once. Measured on LeNet-5's conv1
// (batch 64, 1 thread, per step): forward 0.65 -> 0.38 ms, backward (weights) 0.93 -> ~0.7 ms;
// the whole LeNet-5 step went from 12.8k to 15.5-16k samples/s (interleaved runs).
//
// The kernels are compiled twice (x86-64-v3: AVX2 + FMA, and the default target) and the
// loader picks one for the CPU it runs on, so the library still runs on any x86-64.
#pragma once

#include <cstdint>

namespace dltune::engine {

// The shape of one such convolution and the scratch it needs.
struct DirectConvShape {
  int oc = 0, k = 0, pad = 0;  // output channels, kernel size, zero padding
  int h = 0, w = 0;            // input plane
  int oh = 0, ow = 0;          // output plane: h + 2 pad - k + 1, w + 2 pad - k + 1
  int ow8 = 0;                 // ow rounded up to a multiple of 8 (rows are computed in 8s)
  int ph = 0, pw = 0;          // the padded planes: h + 2 pad rows of ow8 + k - 1 floats

  // Fills the derived fields; false when the shape does not fit (k < 1, pad < 0, no output).
  bool init(int out_channels, int kernel, int padding, int in_h, int in_w);
  // Floats of scratch one call of direct_conv_forward / direct_conv_backward needs, plus (at
  // image_grad_offset()) room for one image's gradient (h, w) that a caller may use.
  int64_t scratch_floats() const;
  int64_t image_grad_offset() const { return 2 * int64_t{ph} * pw + int64_t{oh} * ow8; }
};

// out (oc, oh, ow) = bias + W (oc, k, k) correlated with image (h, w), zero padded; a null
// bias adds nothing.
void direct_conv_forward(const DirectConvShape& s, const float* weights, const float* bias,
                         const float* image, float* out, float* scratch);

// dweights (oc, k, k) += dout (oc, oh, ow) correlated with the padded image; when dimage is not
// null it is set to the gradient of the image (h, w). The bias gradient is the caller's (a sum
// of dout).
void direct_conv_backward(const DirectConvShape& s, const float* weights, const float* image,
                          const float* dout, float* dweights, float* dimage, float* scratch);

}  // namespace dltune::engine
