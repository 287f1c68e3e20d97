// Every GPU op against its CPU twin (ggml's approach: the CPU engine is the reference) and by
// finite differences.
//
// For each op: random parameters and input, then forward on both; the outputs, the input
// gradients and the parameter gradients for a random dout must agree to a norm-wise relative
// error of 1e-4 (5e-4 for conv2d: cuDNN may pick Winograd / FFT algorithms, whose rounding
// differs from the CPU's im2col gemm by a few ulps of the largest term). Max pooling uses
// normal random inputs, which have no ties in practice, so the argmax agrees.
// The finite-difference check uses f = sum(op(x) * r) on the GPU alone.
#include "engine/gpu/gpu_layers.h"

#include <vector>

#include <gtest/gtest.h>

#include "engine/gpu/tests/gpu_test_util.h"
#include "engine/graph/rng.h"
#include "engine/ops/op.h"

namespace dltune::engine::gpu {
namespace {

using recipes::OpKind;

struct Case {
  const char* name;
  recipes::Node node;
  recipes::Shape in;
  int batch;
};

recipes::Node node(OpKind op, int64_t out = 0, int64_t kernel = 0, int64_t stride = 1,
                   int64_t pad = 0, int64_t groups = 1) {
  recipes::Node n{"op", op, {}, {}};
  n.attrs.out = out, n.attrs.kernel = kernel, n.attrs.stride = stride, n.attrs.pad = pad;
  n.attrs.groups = groups;
  return n;
}

std::vector<Case> cases() {
  recipes::Node flat_linear = node(OpKind::kLinear, 7);
  flat_linear.attrs.flatten = true;
  recipes::Node seq_linear = node(OpKind::kLinear, 5);
  seq_linear.attrs.bias = false;
  recipes::Node no_bias = node(OpKind::kConv2d, 6, 3, 1, 1);
  no_bias.attrs.bias = false;
  recipes::Node dropout = node(OpKind::kDropout);
  dropout.attrs.p = 0.4;
  recipes::Node lrn = node(OpKind::kLrn);
  lrn.attrs.alpha = 0.1, lrn.attrs.k = 2.0;
  return {
      {"linear", flat_linear, {5, 2, 3}, 4},
      {"linear_rows_no_bias", seq_linear, {3, 6}, 2},
      {"conv2d", node(OpKind::kConv2d, 6, 3, 1, 1), {3, 8, 8}, 3},
      {"conv2d_no_bias", no_bias, {3, 8, 8}, 2},
      {"conv2d_stride_pad", node(OpKind::kConv2d, 4, 5, 2, 2), {2, 11, 9}, 2},
      {"conv2d_grouped", node(OpKind::kConv2d, 8, 3, 1, 1, 2), {4, 7, 7}, 2},
      {"conv2d_alexnet1", node(OpKind::kConv2d, 8, 11, 4), {3, 35, 35}, 2},
      {"maxpool", node(OpKind::kMaxPool, 0, 2, 2), {3, 8, 8}, 2},
      {"maxpool_overlap", node(OpKind::kMaxPool, 0, 3, 2), {2, 9, 9}, 2},
      {"avgpool", node(OpKind::kAvgPool, 0, 3, 2), {2, 9, 8}, 2},
      {"relu", node(OpKind::kRelu), {3, 4, 4}, 3},
      {"dropout", dropout, {3, 4, 4}, 3},
      {"lrn", lrn, {7, 3, 3}, 2},
      {"flatten", node(OpKind::kFlatten), {2, 3, 3}, 2},
  };
}

// A GPU op and its CPU twin with the same random parameters, input and dout.
struct Pair {
  std::unique_ptr<Op> cpu, gpu;
  recipes::Shape out;
  std::vector<int64_t> sizes;  // per parameter tensor
  std::vector<float> params, x, dout;
  DeviceBuffer d_params, d_grads, d_x, d_y, d_dout, d_din;
  std::vector<float> cpu_grads;
  int64_t out_numel() const { return recipes::numel(out); }
};

// Pointers to consecutive tensors of `sizes` floats from `base`.
std::vector<float*> split(float* base, const std::vector<int64_t>& sizes) {
  std::vector<float*> out;
  for (int64_t n : sizes) {
    out.push_back(base);
    base += n;
  }
  return out;
}

Pair make_pair(GpuContext& ctx, const Case& c, uint64_t seed) {
  Pair p;
  const auto shape = recipes::infer_shape(c.node.op, c.node.attrs, {c.in});
  EXPECT_EQ(shape.problem, "");
  p.out = shape.out;
  p.cpu = make_cpu_op(c.node.op);
  EXPECT_TRUE(p.cpu->setup(c.node, {c.in}, p.out).ok());
  auto g = make_gpu_op(c.node, ctx);
  EXPECT_TRUE(g.ok());
  p.gpu = std::move(*g);
  auto st = p.gpu->setup(c.node, {c.in}, p.out);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message());
  int64_t np = 0;
  for (const auto& d : recipes::op_params(c.node.op, c.node.attrs, {c.in})) {
    p.sizes.push_back(recipes::numel(d.shape));
    np += p.sizes.back();
  }
  p.params.resize(static_cast<size_t>(np));
  p.cpu_grads.resize(static_cast<size_t>(np));
  Rng rng(seed);
  for (auto& v : p.params) v = 0.3f * rng.normal();
  p.cpu->bind(split(p.params.data(), p.sizes), split(p.cpu_grads.data(), p.sizes), {}, {});
  p.x.resize(static_cast<size_t>(c.batch * recipes::numel(c.in)));
  for (auto& v : p.x) v = rng.normal();
  p.dout.resize(static_cast<size_t>(c.batch * p.out_numel()));
  for (auto& v : p.dout) v = rng.normal();
  p.d_params = testing::upload(ctx, p.params);
  p.d_grads = testing::upload(ctx, std::vector<float>(std::max<size_t>(p.params.size(), 1)));
  p.gpu->bind(split(p.d_params.floats(), p.sizes), split(p.d_grads.floats(), p.sizes), {}, {});
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
  OpContext oc{ws.data(), true, 1234, false, true};
  std::vector<float> y(p.dout.size()), din(p.x.size());
  const float* x = p.x.data();
  GradOut gd{din.data(), false};
  p.cpu->forward(oc, &x, y.data(), c.batch);
  p.cpu->backward(oc, &x, y.data(), p.dout.data(), &gd, c.batch);

  OpContext goc{nullptr, true, 1234, false, true};
  const float* dx = p.d_x.floats();
  GradOut ggd{p.d_din.floats(), false};
  p.gpu->forward(goc, &dx, p.d_y.floats(), c.batch);
  p.gpu->backward(goc, &dx, p.d_y.floats(), p.d_dout.floats(), &ggd, c.batch);
  auto st = ctx->synchronize();
  ASSERT_TRUE(st.ok()) << st.error().message();
  const double tol = c.node.op == OpKind::kConv2d ? 5e-4 : 1e-4;
  auto gy = testing::download(*ctx, p.d_y.floats(), y.size());
  EXPECT_LT(testing::rel_error(gy, y), tol) << c.name << " forward";
  auto gdin = testing::download(*ctx, p.d_din.floats(), din.size());
  EXPECT_LT(testing::rel_error(gdin, din), tol) << c.name << " input gradient";
  if (!p.params.empty()) {
    auto gg = testing::download(*ctx, p.d_grads.floats(), p.params.size());
    EXPECT_LT(testing::rel_error(gg, p.cpu_grads), tol) << c.name << " parameter gradient";
  }
}

// f = sum(op(x) * dout), evaluated on the GPU.
double objective(GpuContext& ctx, Pair& p, int batch) {
  OpContext oc{nullptr, true, 1234, false, true};
  const float* x = p.d_x.floats();
  p.gpu->forward(oc, &x, p.d_y.floats(), batch);
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
  if (c.node.op == OpKind::kMaxPool) {
    for (size_t i = 0; i < p.x.size(); ++i) p.x[i] = 0.05f * static_cast<float>((i * 37) % 101);
    ctx->to_device(p.d_x.data(), p.x.data(), p.x.size() * sizeof(float));
  }
  OpContext oc{nullptr, true, 1234, false, true};
  const float* x = p.d_x.floats();
  GradOut gd{p.d_din.floats(), false};
  p.gpu->forward(oc, &x, p.d_y.floats(), c.batch);
  p.gpu->backward(oc, &x, p.d_y.floats(), p.d_dout.floats(), &gd, c.batch);
  auto din = testing::download(*ctx, p.d_din.floats(), p.x.size());
  auto grads = testing::download(*ctx, p.d_grads.floats(), p.params.size());
  check_fd(*ctx, p, c.batch, p.x, p.d_x, din, std::string(c.name) + " input");
  if (!p.params.empty())
    check_fd(*ctx, p, c.batch, p.params, p.d_params, grads, std::string(c.name) + " params");
  auto st = ctx->synchronize();
  EXPECT_TRUE(st.ok()) << st.error().message();
}

INSTANTIATE_TEST_SUITE_P(Ops, GpuLayerTest, ::testing::ValuesIn(cases()),
                         [](const auto& tp) { return std::string(tp.param.name); });

}  // namespace
}  // namespace dltune::engine::gpu
