// engine/ops/conv3x3.h against a direct double-precision evaluation of the definitions
// (cross-correlation with zero padding 1 and stride 1 or 2, its input and weight gradients), on
// shapes that exercise partial channel tiles (3, 5, 13 channels), rows that do not fill a
// vector, odd planes at stride 2 (phases of unequal size), a 1x1 image, and the batched weight
// gradient. The Conv2d op that uses these kernels is checked
// against PyTorch by torch_ref_test.
#include "engine/ops/conv3x3.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/tests/kernel_checks.h"

namespace dltune::engine {
namespace {

struct Case {
  int n, c, oc, h, w;
  int stride = 1;
};

// in(n, c, y, x) with zero outside the plane.
double at(const std::vector<float>& t, const Case& k, int channels, int n, int c, int y, int x) {
  if (y < 0 || y >= k.h || x < 0 || x >= k.w) return 0.0;
  return t[((size_t(n) * channels + c) * k.h + y) * k.w + x];
}

using test::expect_near_all;
using test::Guarded;
using test::random_vector;

class Conv3x3 : public ::testing::TestWithParam<Case> {};

TEST_P(Conv3x3, MatchesTheDefinition) {
  const Case k = GetParam();
  std::mt19937 rng(k.c * 131 + k.oc * 17 + k.h * 5 + k.w + k.stride);
  Conv3x3Shape s;
  ASSERT_TRUE(s.init(k.c, k.oc, k.h, k.w, k.stride));
  const int oh = (k.h - 1) / k.stride + 1, ow = (k.w - 1) / k.stride + 1;
  ASSERT_EQ(s.oh, oh);
  ASSERT_EQ(s.ow, ow);
  const size_t in_n = size_t(k.n) * k.c * k.h * k.w, out_n = size_t(k.n) * k.oc * oh * ow;
  const std::vector<float> x = random_vector(in_n, &rng),
                           w = random_vector(size_t(k.oc) * k.c * 9, &rng),
                           bias = random_vector(k.oc, &rng), dy = random_vector(out_n, &rng);

  std::vector<float> packed(s.packed_floats());
  conv3x3_pack(s, w.data(), packed.data());
  std::vector<float> pin(size_t(k.n) * s.padded_in_floats()),
      pdy(size_t(k.n) * s.padded_dout_floats()), scratch(s.grad_scratch_floats());
  conv3x3_pad_input(s, x.data(), k.n * k.c, pin.data());
  conv3x3_pad_grad(s, dy.data(), k.n * k.oc, pdy.data());

  Guarded y(out_n, 0.0f), dx(in_n, 0.5f);
  std::vector<float> dw(w.size(), 0.25f);
  for (int n = 0; n < k.n; ++n) {
    conv3x3_forward(s, packed.data(), bias.data(), pin.data() + n * s.padded_in_floats(),
                    y.data() + size_t(n) * k.oc * oh * ow);
    // odd images' gradients are added to the 0.5s, even images' stored over them
    conv3x3_input_grad(s, packed.data(), pdy.data() + n * s.padded_dout_floats(), scratch.data(),
                       dx.data() + size_t(n) * k.c * k.h * k.w, n % 2 == 1);
  }
  EXPECT_TRUE(y.guards_intact()) << "forward wrote outside its output";
  EXPECT_TRUE(dx.guards_intact()) << "input gradient wrote outside its tensor";
  // all images but the last in one call, the last in another: both add to dw's 0.25s
  if (k.n > 1) conv3x3_weight_grad(s, pin.data(), pdy.data(), k.n - 1, dw.data());
  conv3x3_weight_grad(s, pin.data() + (k.n - 1) * s.padded_in_floats(),
                      pdy.data() + (k.n - 1) * s.padded_dout_floats(), 1, dw.data());

  std::vector<double> y_ref(out_n), dx_ref(in_n), dw_ref(w.size(), 0.25);
  for (int n = 0; n < k.n; ++n) {
    for (int o = 0; o < k.oc; ++o) {
      for (int yy = 0; yy < oh; ++yy) {
        for (int xx = 0; xx < ow; ++xx) {
          double acc = bias[o];
          const double g = dy[((size_t(n) * k.oc + o) * oh + yy) * ow + xx];
          for (int c = 0; c < k.c; ++c) {
            for (int ki = 0; ki < 3; ++ki) {
              for (int kj = 0; kj < 3; ++kj) {
                const int iy = k.stride * yy - 1 + ki, ix = k.stride * xx - 1 + kj;
                const double wv = w[((size_t(o) * k.c + c) * 3 + ki) * 3 + kj];
                const double xv = at(x, k, k.c, n, c, iy, ix);
                acc += wv * xv;
                dw_ref[((size_t(o) * k.c + c) * 3 + ki) * 3 + kj] += g * xv;
                if (iy >= 0 && iy < k.h && ix >= 0 && ix < k.w) {
                  dx_ref[((size_t(n) * k.c + c) * k.h + iy) * k.w + ix] += g * wv;
                }
              }
            }
          }
          y_ref[((size_t(n) * k.oc + o) * oh + yy) * ow + xx] = acc;
        }
      }
    }
    if (n % 2 == 1) {
      for (size_t i = 0; i < size_t(k.c) * k.h * k.w; ++i)
        dx_ref[size_t(n) * k.c * k.h * k.w + i] += 0.5;
    }
  }
  expect_near_all(y.inner(), y_ref, "forward");
  expect_near_all(dx.inner(), dx_ref, "input gradient");
  expect_near_all(dw, dw_ref, "weight gradient");
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv3x3,
                         ::testing::Values(Case{2, 16, 16, 32, 32},  // resnet20's first stage
                                           Case{3, 3, 16, 8, 8},     // an RGB stem
                                           Case{4, 3, 16, 32, 32},
                                           Case{2, 5, 13, 7, 9},  // partial tiles, odd rows
                                           Case{4, 16, 8, 1, 1},  // a 1x1 plane
                                           Case{3, 8, 24, 3, 20}, Case{1, 13, 5, 11, 6},
                                           // stride 2: resnet20's two, odd and tiny planes
                                           Case{2, 16, 32, 32, 32, 2}, Case{3, 32, 64, 16, 16, 2},
                                           Case{2, 5, 13, 7, 9, 2}, Case{3, 8, 11, 10, 5, 2},
                                           Case{4, 3, 9, 1, 1, 2}, Case{2, 6, 8, 2, 3, 2},
                                           // tight planes (rows without a zero between
                                           // them): 16 and 8 wide, 4x4, 2x8, and at stride 2
                                           // a 7-wide input (its odd phase a column short)
                                           Case{2, 9, 10, 16, 16}, Case{3, 4, 6, 4, 4},
                                           Case{2, 5, 7, 2, 8}, Case{2, 6, 5, 8, 7, 2}));

TEST(Conv3x3Shape, RefusesEmptyShapes) {
  Conv3x3Shape s;
  EXPECT_FALSE(s.init(0, 4, 4, 4));
  EXPECT_FALSE(s.init(4, 4, 0, 4));
  EXPECT_FALSE(s.init(4, 4, 4, 4, 3));
  EXPECT_TRUE(s.init(1, 1, 1, 1));
  EXPECT_GE(s.plane, s.origin + s.span16 + s.pw + 1);
  EXPECT_GE(s.origin, s.pw + 1);
  EXPECT_EQ(s.origin % 16, 0);
  EXPECT_TRUE(s.init(3, 5, 9, 7, 2));
  EXPECT_EQ(s.oh, 5);
  EXPECT_EQ(s.ow, 4);
  EXPECT_EQ(s.phases, 4);
  EXPECT_FALSE(s.tight);  // 4 wide, but 5 x 4 pixels are not whole vectors
  EXPECT_EQ(s.pw, 5);
  EXPECT_TRUE(s.init(3, 5, 16, 16, 2));
  EXPECT_TRUE(s.tight);
  EXPECT_EQ(s.pw, 8);
  EXPECT_TRUE(s.init(3, 5, 32, 32));
  EXPECT_FALSE(s.tight);  // wider than a vector
  EXPECT_EQ(s.pw, 33);
}

}  // namespace
}  // namespace dltune::engine
