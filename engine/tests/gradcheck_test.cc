// Finite-difference gradient checks for every layer kind and for a whole small model.
//
// For a random input x and a fixed random projection r, the scalar f = sum(layer(x) * r) has
// df/dx = backward(dout = r) and df/dparams = the parameter gradient; both are compared with
// central differences in double-checked float (relative tolerance).
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "engine/layers.h"
#include "engine/loss.h"
#include "engine/model.h"

namespace dltune::engine {
namespace {

struct Setup {
  std::unique_ptr<Layer> layer;
  Dims in, out;
  int batch;
  std::vector<float> params, grads, x, r, ws;
};

Setup make(const LayerSpec& spec, Dims in, int batch, uint64_t seed) {
  Setup s;
  s.layer = make_layer(spec);
  auto out = s.layer->setup(in);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message());
  s.in = in;
  s.out = *out;
  s.batch = batch;
  s.params.resize(s.layer->num_params());
  s.grads.resize(s.layer->num_params());
  s.layer->bind(s.params.data(), s.grads.data());
  Rng rng(seed);
  s.layer->init_params(rng);
  // Biases and weights both nonzero and not tiny, so the check exercises them.
  for (auto& p : s.params) p += 0.1f * rng.normal();
  s.layer->reserve(batch);
  s.ws.resize(std::max<int64_t>(1, s.layer->workspace_floats(batch)));
  s.x.resize(batch * in.size());
  for (auto& v : s.x) v = rng.normal();
  s.r.resize(batch * s.out.size());
  for (auto& v : s.r) v = rng.normal();
  return s;
}

double objective(Setup& s) {
  std::vector<float> y(s.batch * s.out.size());
  LayerContext ctx{s.ws.data(), true, 42};
  s.layer->forward(ctx, s.x.data(), y.data(), s.batch);
  double f = 0.0;
  for (size_t i = 0; i < y.size(); ++i) f += double{y[i]} * s.r[i];
  return f;
}

// Checks up to `samples` coordinates of a vector v against finite differences of objective().
void check_coords(Setup& s, std::vector<float>& v, const std::vector<float>& analytic,
                  const char* what, int samples) {
  const float eps = 1e-2f;
  const size_t n = v.size();
  const size_t step = std::max<size_t>(1, n / samples);
  double max_err = 0.0;
  for (size_t i = 0; i < n; i += step) {
    const float keep = v[i];
    v[i] = keep + eps;
    double fp = objective(s);
    v[i] = keep - eps;
    double fm = objective(s);
    v[i] = keep;
    double num = (fp - fm) / (2.0 * eps);
    double err = std::abs(num - analytic[i]) / std::max(1.0, std::abs(num));
    max_err = std::max(max_err, err);
    EXPECT_LT(err, 2e-2) << s.layer->kind() << " " << what << "[" << i << "]: numeric " << num
                         << " analytic " << analytic[i];
  }
  ::testing::Test::RecordProperty(std::string(s.layer->kind()) + "_" + what + "_max_err",
                                  std::to_string(max_err));
}

void gradcheck(const LayerSpec& spec, Dims in, int batch = 2, uint64_t seed = 1) {
  Setup s = make(spec, in, batch, seed);
  objective(s);  // forward (saves state)
  std::vector<float> y(s.batch * s.out.size()), dx(s.x.size());
  LayerContext ctx{s.ws.data(), true, 42};
  s.layer->forward(ctx, s.x.data(), y.data(), s.batch);
  s.layer->backward(ctx, s.x.data(), y.data(), s.r.data(), dx.data(), s.batch);
  std::vector<float> dparams = s.grads;
  check_coords(s, s.x, dx, "input", 60);
  if (!s.params.empty()) check_coords(s, s.params, dparams, "param", 60);
}

TEST(Gradcheck, Linear) { gradcheck(LayerSpec::linear(7), {5, 2, 3}); }
TEST(Gradcheck, Conv2d) { gradcheck(LayerSpec::conv(4, 3), {3, 6, 5}); }
TEST(Gradcheck, Conv2dStridePad) { gradcheck(LayerSpec::conv(3, 3, 2, 1), {2, 7, 6}); }
TEST(Gradcheck, Conv2dGroups) { gradcheck(LayerSpec::conv(6, 3, 1, 1, 2), {4, 5, 5}, 3); }
TEST(Gradcheck, Conv2dLargeKernelStride) { gradcheck(LayerSpec::conv(2, 5, 3, 2), {1, 11, 9}); }
// One input channel, stride 1: the direct kernels (engine/conv_direct.h). Width 37 with pad 2
// gives 37 output columns: a block of 32 and a partial block of 8; kernel 5 splits each kernel
// row into taps 0-3 and 4.
TEST(Gradcheck, Conv2dOneChannelDirect) { gradcheck(LayerSpec::conv(3, 5, 1, 2), {1, 6, 37}); }
TEST(Gradcheck, Conv2dOneChannelDirectSmall) { gradcheck(LayerSpec::conv(2, 3), {1, 5, 9}, 3); }

// The direct path's forward against the definition of a convolution (cross-correlation with
// zero padding), element by element.
TEST(Conv2dDirect, ForwardMatchesTheDefinition) {
  const int oc = 4, k = 5, pad = 2, h = 7, w = 30;
  struct Setup s = make(LayerSpec::conv(oc, k, 1, pad), {1, h, w}, 3, 7);
  std::vector<float> y(s.batch * s.out.size());
  LayerContext ctx{s.ws.data(), true, 42};
  s.layer->forward(ctx, s.x.data(), y.data(), s.batch);
  const int oh = s.out.h, ow = s.out.w;
  ASSERT_EQ(oh, h);
  ASSERT_EQ(ow, w);
  for (int n = 0; n < s.batch; ++n) {
    for (int o = 0; o < oc; ++o) {
      for (int yy = 0; yy < oh; ++yy) {
        for (int xx = 0; xx < ow; ++xx) {
          double want = s.params[oc * k * k + o];
          for (int ki = 0; ki < k; ++ki) {
            for (int kj = 0; kj < k; ++kj) {
              const int iy = yy + ki - pad, ix = xx + kj - pad;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              want += double{s.params[(o * k + ki) * k + kj]} * s.x[(n * h + iy) * w + ix];
            }
          }
          const float got = y[((n * oc + o) * oh + yy) * ow + xx];
          ASSERT_NEAR(got, want, 1e-4)
              << "image " << n << " channel " << o << " at " << yy << "," << xx;
        }
      }
    }
  }
}
TEST(Gradcheck, MaxPool) { gradcheck(LayerSpec::maxpool(2, 2), {3, 6, 6}); }
TEST(Gradcheck, MaxPoolOverlap) { gradcheck(LayerSpec::maxpool(3, 2), {2, 7, 7}); }
TEST(Gradcheck, AvgPool) { gradcheck(LayerSpec::avgpool(3, 2), {2, 7, 8}); }
TEST(Gradcheck, Relu) { gradcheck(LayerSpec::relu(), {4, 3, 3}); }
TEST(Gradcheck, Dropout) { gradcheck(LayerSpec::dropout(0.3f), {4, 3, 3}); }
TEST(Gradcheck, Lrn) { gradcheck(LayerSpec::lrn(5, 0.5f, 0.75f, 1.0f), {7, 3, 2}); }
TEST(Gradcheck, LrnEvenSize) { gradcheck(LayerSpec::lrn(4, 0.3f, 0.6f, 2.0f), {6, 2, 2}); }
TEST(Gradcheck, Flatten) { gradcheck(LayerSpec::flatten(), {2, 3, 3}); }

TEST(Gradcheck, SoftmaxCrossEntropy) {
  const int B = 3, K = 5;
  Rng rng(3);
  std::vector<float> z(B * K), dz(B * K);
  for (auto& v : z) v = 2.0f * rng.normal();
  std::vector<int32_t> y = {0, 4, 2};
  softmax_cross_entropy(z.data(), y.data(), B, K, 7.0f, dz.data());
  for (int i = 0; i < B * K; ++i) {
    const float keep = z[i];
    z[i] = keep + 1e-2f;
    double fp = softmax_cross_entropy(z.data(), y.data(), B, K, 7.0f, nullptr) / 7.0;
    z[i] = keep - 1e-2f;
    double fm = softmax_cross_entropy(z.data(), y.data(), B, K, 7.0f, nullptr) / 7.0;
    z[i] = keep;
    EXPECT_NEAR((fp - fm) / 2e-2, dz[i], 1e-3) << i;
  }
}

// The whole model: parameters of every layer against finite differences of the mean loss.
TEST(Gradcheck, WholeSmallModel) {
  ModelSpec spec{
      "tiny",
      {2, 8, 8},
      4,
      {LayerSpec::conv(4, 3, 1, 1, 2), LayerSpec::relu(), LayerSpec::lrn(3, 0.2f, 0.75f),
       LayerSpec::maxpool(2, 2), LayerSpec::conv(6, 3), LayerSpec::avgpool(2, 1),
       LayerSpec::flatten(), LayerSpec::linear(8), LayerSpec::relu(), LayerSpec::linear(4)}};
  auto m = Model::build(spec);
  ASSERT_TRUE(m.ok()) << m.error().message();
  const int B = 3;
  m->init_params(5);
  m->reserve(B);
  Rng rng(9);
  std::vector<float> x(B * spec.input.size());
  for (auto& v : x) v = rng.normal();
  std::vector<int32_t> y = {1, 3, 0};
  std::vector<float> dz(B * 4);
  auto loss = [&] {
    const float* z = m->forward(x.data(), B, true, 1);
    return softmax_cross_entropy(z, y.data(), B, 4, B, nullptr) / B;
  };
  const float* z = m->forward(x.data(), B, true, 1);
  softmax_cross_entropy(z, y.data(), B, 4, B, dz.data());
  int calls = 0;
  int64_t last = m->num_params();
  m->backward(x.data(), dz.data(), B, [&](int64_t from) {
    EXPECT_LT(from, last);  // reverse layer order: the ready tail only grows
    last = from;
    ++calls;
  });
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(last, 0);
  std::vector<float> g(m->grads(), m->grads() + m->num_params());
  float* p = m->params();
  double max_err = 0.0;
  for (int64_t i = 0; i < m->num_params(); i += 3) {
    const float keep = p[i];
    p[i] = keep + 1e-2f;
    double fp = loss();
    p[i] = keep - 1e-2f;
    double fm = loss();
    p[i] = keep;
    double num = (fp - fm) / 2e-2;
    max_err = std::max(max_err, std::abs(num - g[i]));
    EXPECT_NEAR(num, g[i], 2e-3 + 2e-2 * std::abs(num)) << "param " << i;
  }
}

}  // namespace
}  // namespace dltune::engine
