// Every GPU layer against its CPU twin (ggml's approach: the CPU engine is the reference) and
// by finite differences.
//
// For each layer: random parameters and input, then forward on both; the outputs, the input
// gradients and the parameter gradients for a random dout must agree to a norm-wise relative
// error of 1e-4 (5e-4 for conv2d: cuDNN may pick Winograd / FFT algorithms, whose rounding
// differs from the CPU's im2col gemm by a few ulps of the largest term). Max pooling uses
// normal random inputs, which have no ties in practice, so the argmax agrees.
// The finite-difference check uses f = sum(layer(x) * r) on the GPU alone.
#include "engine/gpu/gpu_layers.h"

#include <vector>

#include <gtest/gtest.h>

#include "engine/gpu/tests/gpu_test_util.h"
#include "engine/layer.h"

namespace dltune::engine::gpu {
namespace {

struct Case {
  const char* name;
  LayerSpec spec;
  Dims in;
  int batch;
};

std::vector<Case> cases() {
  using L = LayerSpec;
  return {
      {"linear", L::linear(7), {5, 2, 3}, 4},
      {"conv2d", L::conv(6, 3, 1, 1), {3, 8, 8}, 3},
      {"conv2d_stride_pad", L::conv(4, 5, 2, 2), {2, 11, 9}, 2},
      {"conv2d_grouped", L::conv(8, 3, 1, 1, 2), {4, 7, 7}, 2},
      {"conv2d_alexnet1", L::conv(8, 11, 4), {3, 35, 35}, 2},
      {"maxpool", L::maxpool(2, 2), {3, 8, 8}, 2},
      {"maxpool_overlap", L::maxpool(3, 2), {2, 9, 9}, 2},
      {"avgpool", L::avgpool(3, 2), {2, 9, 8}, 2},
      {"relu", L::relu(), {3, 4, 4}, 3},
      {"dropout", L::dropout(0.4f), {3, 4, 4}, 3},
      {"lrn", L::lrn(5, 1e-1f, 0.75f, 2.0f), {7, 3, 3}, 2},
      {"flatten", L::flatten(), {2, 3, 3}, 2},
  };
}

// A GPU layer and its CPU twin with the same random parameters, input and dout.
struct Pair {
  std::unique_ptr<Layer> cpu, gpu;
  Dims out;
  std::vector<float> params, x, dout;
  DeviceBuffer d_params, d_grads, d_x, d_y, d_dout, d_din;
  std::vector<float> cpu_grads;
};

Pair make_pair(GpuContext& ctx, const Case& c, uint64_t seed) {
  Pair p;
  p.cpu = make_layer(c.spec);
  auto g = make_gpu_layer(c.spec, ctx);
  EXPECT_TRUE(g.ok());
  p.gpu = std::move(*g);
  auto out = p.cpu->setup(c.in);
  EXPECT_TRUE(out.ok());
  auto gout = p.gpu->setup(c.in);
  EXPECT_TRUE(gout.ok() && *gout == *out);
  p.out = *out;
  EXPECT_EQ(p.gpu->num_params(), p.cpu->num_params());
  const size_t np = static_cast<size_t>(p.cpu->num_params());
  p.params.resize(np);
  p.cpu_grads.resize(np);
  p.cpu->bind(p.params.data(), p.cpu_grads.data());
  Rng rng(seed);
  p.cpu->init_params(rng);
  for (auto& v : p.params) v += 0.1f * rng.normal();
  p.x.resize(static_cast<size_t>(c.batch * c.in.size()));
  for (auto& v : p.x) v = rng.normal();
  p.dout.resize(static_cast<size_t>(c.batch * p.out.size()));
  for (auto& v : p.dout) v = rng.normal();
  p.d_params = testing::upload(ctx, p.params);
  p.d_grads = testing::upload(ctx, std::vector<float>(std::max<size_t>(np, 1)));
  p.gpu->bind(p.d_params.floats(), p.d_grads.floats());
  p.cpu->reserve(c.batch);
  p.gpu->reserve(c.batch);
  p.d_x = testing::upload(ctx, p.x);
  p.d_y = testing::upload(ctx, std::vector<float>(p.dout.size()));
  p.d_dout = testing::upload(ctx, p.dout);
  p.d_din = testing::upload(ctx, std::vector<float>(p.x.size()));
  return p;
}

class GpuLayerTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuLayerTest, MatchesCpu) {
  DLTUNE_GPU_OR_SKIP(ctx);
  const Case& c = GetParam();
  Pair p = make_pair(*ctx, c, 7);
  std::vector<float> ws(std::max<int64_t>(1, p.cpu->workspace_floats(c.batch)));
  LayerContext lc{ws.data(), true, 1234};
  std::vector<float> y(p.dout.size()), din(p.x.size());
  p.cpu->forward(lc, p.x.data(), y.data(), c.batch);
  p.cpu->backward(lc, p.x.data(), y.data(), p.dout.data(), din.data(), c.batch);

  LayerContext glc{nullptr, true, 1234};
  p.gpu->forward(glc, p.d_x.floats(), p.d_y.floats(), c.batch);
  p.gpu->backward(glc, p.d_x.floats(), p.d_y.floats(), p.d_dout.floats(), p.d_din.floats(),
                  c.batch);
  auto st = ctx->synchronize();
  ASSERT_TRUE(st.ok()) << st.error().message();
  const double tol = c.spec.kind == LayerSpec::Kind::kConv2d ? 5e-4 : 1e-4;
  auto gy = testing::download(*ctx, p.d_y.floats(), y.size());
  EXPECT_LT(testing::rel_error(gy, y), tol) << c.name << " forward";
  auto gdin = testing::download(*ctx, p.d_din.floats(), din.size());
  EXPECT_LT(testing::rel_error(gdin, din), tol) << c.name << " input gradient";
  if (!p.params.empty()) {
    auto gg = testing::download(*ctx, p.d_grads.floats(), p.params.size());
    EXPECT_LT(testing::rel_error(gg, p.cpu_grads), tol) << c.name << " parameter gradient";
  }
}

// f = sum(layer(x) * dout), evaluated on the GPU.
double objective(GpuContext& ctx, Pair& p, int batch) {
  LayerContext lc{nullptr, true, 1234};
  p.gpu->forward(lc, p.d_x.floats(), p.d_y.floats(), batch);
  auto y = testing::download(ctx, p.d_y.floats(), p.dout.size());
  double f = 0.0;
  for (size_t i = 0; i < y.size(); ++i) f += double{y[i]} * p.dout[i];
  return f;
}

// Central differences over up to 12 coordinates of `host` (mirrored in `dev`).
void check_fd(GpuContext& ctx, Pair& p, int batch, std::vector<float>& host, DeviceBuffer& dev,
              const std::vector<float>& analytic, const std::string& what) {
  const float eps = 1e-2f;
  const size_t step = std::max<size_t>(1, host.size() / 12);
  for (size_t i = 0; i < host.size(); i += step) {
    const float keep = host[i];
    host[i] = keep + eps;
    ctx.to_device(dev.floats() + i, &host[i], sizeof(float));
    const double fp = objective(ctx, p, batch);
    host[i] = keep - eps;
    ctx.to_device(dev.floats() + i, &host[i], sizeof(float));
    const double fm = objective(ctx, p, batch);
    host[i] = keep;
    ctx.to_device(dev.floats() + i, &host[i], sizeof(float));
    const double num = (fp - fm) / (2.0 * eps);
    const double err = std::abs(num - analytic[i]) / std::max(1.0, std::abs(num));
    EXPECT_LT(err, 2e-2) << what << "[" << i << "]: numeric " << num << " analytic " << analytic[i];
  }
}

TEST_P(GpuLayerTest, FiniteDifferences) {
  DLTUNE_GPU_OR_SKIP(ctx);
  const Case& c = GetParam();
  Pair p = make_pair(*ctx, c, 11);
  // Max pooling: a finite step must not change the argmax; spread the inputs apart.
  if (c.spec.kind == LayerSpec::Kind::kMaxPool) {
    for (size_t i = 0; i < p.x.size(); ++i) p.x[i] = 0.05f * static_cast<float>((i * 37) % 101);
    ctx->to_device(p.d_x.data(), p.x.data(), p.x.size() * sizeof(float));
  }
  LayerContext lc{nullptr, true, 1234};
  p.gpu->forward(lc, p.d_x.floats(), p.d_y.floats(), c.batch);
  p.gpu->backward(lc, p.d_x.floats(), p.d_y.floats(), p.d_dout.floats(), p.d_din.floats(), c.batch);
  auto din = testing::download(*ctx, p.d_din.floats(), p.x.size());
  auto grads = testing::download(*ctx, p.d_grads.floats(), p.params.size());
  check_fd(*ctx, p, c.batch, p.x, p.d_x, din, std::string(c.name) + " input");
  if (!p.params.empty())
    check_fd(*ctx, p, c.batch, p.params, p.d_params, grads, std::string(c.name) + " params");
  auto st = ctx->synchronize();
  EXPECT_TRUE(st.ok()) << st.error().message();
}

INSTANTIATE_TEST_SUITE_P(Layers, GpuLayerTest, ::testing::ValuesIn(cases()),
                         [](const auto& tp) { return std::string(tp.param.name); });

}  // namespace
}  // namespace dltune::engine::gpu
