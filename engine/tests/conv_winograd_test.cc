// engine/ops/conv_winograd.h against a direct double-precision evaluation of the definitions
// (cross-correlation with zero padding 1, its input and weight gradients), on resnet20's three
// stages (one image a block, several, a last block part full), a plane width no vector divides,
// a single tile, and scratch full of NaNs (no stale value may reach a result). The Conv2d op
// that runs the kernel is checked against PyTorch by torch_ref_test (single layers and a whole
// resnet20 training step) and across thread counts by threads_test.
#include "engine/ops/conv_winograd.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/tests/kernel_checks.h"

namespace dltune::engine {
namespace {

struct Case {
  int n, c, oc, h, w;
};

using test::expect_near_all;
using test::Guarded;
using test::random_vector;

class Winograd : public ::testing::TestWithParam<Case> {};

TEST_P(Winograd, MatchesTheDefinition) {
  if (!winograd_runs()) GTEST_SKIP() << "this CPU (or DLTUNE_KERNELS=generic) runs no AVX2 + FMA";
  const Case k = GetParam();
  std::mt19937 rng(k.c * 131 + k.oc * 17 + k.h * 5 + k.w);
  WinogradShape s;
  ASSERT_TRUE(s.init(k.c, k.oc, k.h, k.w));
  const size_t plane = size_t(k.h) * k.w;
  const size_t in_n = size_t(k.n) * k.c * plane, out_n = size_t(k.n) * k.oc * plane;
  const std::vector<float> x = random_vector(in_n, &rng),
                           w = random_vector(size_t(k.oc) * k.c * 9, &rng),
                           bias = random_vector(k.oc, &rng), dy = random_vector(out_n, &rng);
  std::vector<float> packed(s.packed_floats());
  winograd_pack(s, w.data(), packed.data());
  std::vector<float> scratch(s.scratch_floats(), std::numeric_limits<float>::quiet_NaN());

  Guarded y(out_n, 0.0f), dx(in_n, 0.5f);
  winograd_forward(s, packed.data(), bias.data(), x.data(), k.n, y.data(), false, scratch.data());
  winograd_input_grad(s, packed.data(), dy.data(), k.n, dx.data(), true, scratch.data());
  EXPECT_TRUE(y.guards_intact()) << "forward wrote outside its output";
  EXPECT_TRUE(dx.guards_intact()) << "input gradient wrote outside its tensor";
  // All images but the last stored over garbage, then the last added.
  std::vector<float> dw(w.size(), 7.0f);
  if (k.n > 1)
    winograd_weight_grad(s, x.data(), dy.data(), k.n - 1, dw.data(), false, scratch.data());
  winograd_weight_grad(s, x.data() + (k.n - 1) * size_t(k.c) * plane,
                       dy.data() + (k.n - 1) * size_t(k.oc) * plane, 1, dw.data(), k.n > 1,
                       scratch.data());

  auto at = [&](const std::vector<float>& t, int channels, int n, int c, int yy, int xx) {
    if (yy < 0 || yy >= k.h || xx < 0 || xx >= k.w) return 0.0;
    return double{t[((size_t(n) * channels + c) * k.h + yy) * k.w + xx]};
  };
  std::vector<double> y_ref(out_n), dx_ref(in_n, 0.5), dw_ref(w.size(), 0.0);
  for (int n = 0; n < k.n; ++n) {
    for (int o = 0; o < k.oc; ++o) {
      for (int yy = 0; yy < k.h; ++yy) {
        for (int xx = 0; xx < k.w; ++xx) {
          double acc = bias[o];
          const double g = at(dy, k.oc, n, o, yy, xx);
          for (int c = 0; c < k.c; ++c) {
            for (int ki = 0; ki < 3; ++ki) {
              for (int kj = 0; kj < 3; ++kj) {
                const int iy = yy - 1 + ki, ix = xx - 1 + kj;
                const size_t wi = ((size_t(o) * k.c + c) * 3 + ki) * 3 + kj;
                const double xv = at(x, k.c, n, c, iy, ix);
                acc += w[wi] * xv;
                dw_ref[wi] += g * xv;
                if (iy >= 0 && iy < k.h && ix >= 0 && ix < k.w)
                  dx_ref[((size_t(n) * k.c + c) * k.h + iy) * k.w + ix] += g * w[wi];
              }
            }
          }
          y_ref[((size_t(n) * k.oc + o) * k.h + yy) * k.w + xx] = acc;
        }
      }
    }
  }
  expect_near_all(y.inner(), y_ref, "forward");
  expect_near_all(dx.inner(), dx_ref, "input gradient");
  expect_near_all(dw, dw_ref, "weight gradient");
}

INSTANTIATE_TEST_SUITE_P(Shapes, Winograd,
                         ::testing::Values(Case{2, 16, 16, 32, 32},  // resnet20's stages
                                           Case{3, 32, 32, 16, 16},
                                           Case{13, 64, 64, 8, 8},  // blocks, one part full
                                           Case{3, 4, 8, 4, 18},    // rows no vector divides
                                           Case{2, 8, 12, 2, 2},    // one tile
                                           Case{5, 12, 4, 6, 10}));

TEST(WinogradShape, TakesOnlyItsShapes) {
  WinogradShape s;
  EXPECT_FALSE(s.init(16, 16, 7, 8)) << "odd plane";
  EXPECT_FALSE(s.init(16, 16, 8, 1));
  EXPECT_FALSE(s.init(3, 16, 8, 8)) << "channels not in fours";
  EXPECT_FALSE(s.init(16, 6, 8, 8));
  ASSERT_TRUE(s.init(16, 32, 32, 32));
  EXPECT_EQ(s.th, 16);
  EXPECT_EQ(s.tw, 17);  // one past each row's end
  EXPECT_EQ(s.tiles, 16 * 17);
  EXPECT_GE(s.images, 1);
  EXPECT_GE(s.wgrad_images, s.images);
  EXPECT_EQ(s.stride(1) % 8, 0);
  EXPECT_GE(s.stride(1), s.tiles + 8);
  // 16 products per 2x2 tile and channel pair, against the direct kernel's 36.
  EXPECT_EQ(s.gemm_macs(), int64_t{16} * 16 * 32 * 16 * 17);
}

}  // namespace
}  // namespace dltune::engine
