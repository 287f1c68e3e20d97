// Every GPU op against its CPU twin (ggml's approach: the CPU engine is the reference) and by
// finite differences. Skips (GTEST_SKIP with the reason) without a GPU.
//
// For each op: random parameters, state and inputs, then forward and backward on both, twice:
// gradients written (the GPU's gradient and output buffers start as NaN, so a kernel that reads
// what it should only write shows), then added to random values already there (GradOut::
// accumulate and accumulate_grad: residual inputs, tied weights, micro-batches). Outputs, input
// gradients, parameter gradients and state (batch norm's running statistics) must agree to a
// norm-wise relative error of 1e-4 (5e-4 for conv2d: cuDNN may pick Winograd / FFT algorithms,
// whose rounding differs from the CPU's im2col gemm by a few ulps of the largest term). Max
// pooling uses normal random inputs, which have no ties in practice, so the argmax agrees.
// The finite-difference check uses f = sum(op(x) * r) on the GPU alone.
#include "engine/gpu/gpu_layers.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/rng.h"
#include "engine/gpu/tests/cpu_twin.h"
#include "engine/gpu/tests/gpu_test_util.h"
#include "engine/ops/op.h"

namespace dltune::engine::gpu {
namespace {

using recipes::OpKind;
using testing::split;

struct Case {
  const char* name;
  recipes::Node node;
  std::vector<recipes::Shape> in;
  int batch;
  bool training = true;
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
  recipes::Node tied = node(OpKind::kLinear, 5);
  tied.attrs.bias = false, tied.attrs.tie = "wte.weight";
  recipes::Node no_bias = node(OpKind::kConv2d, 6, 3, 1, 1);
  no_bias.attrs.bias = false;
  recipes::Node dropout = node(OpKind::kDropout);
  dropout.attrs.p = 0.4;
  recipes::Node lrn = node(OpKind::kLrn);
  lrn.attrs.alpha = 0.1, lrn.attrs.k = 2.0;
  recipes::Node max_ceil = node(OpKind::kMaxPool, 0, 3, 2);
  max_ceil.attrs.ceil_mode = true;
  recipes::Node avg_nocount = node(OpKind::kAvgPool, 0, 3, 2, 1);
  avg_nocount.attrs.ceil_mode = true, avg_nocount.attrs.count_include_pad = false;
  recipes::Node adaptive = node(OpKind::kAdaptiveAvgPool);
  adaptive.attrs.out_h = 3, adaptive.attrs.out_w = 2;
  recipes::Node global = node(OpKind::kAdaptiveAvgPool);
  recipes::Node bn = node(OpKind::kBatchNorm);
  bn.attrs.momentum = 0.2;
  recipes::Node pad = node(OpKind::kPadChannels, 8, 0, 2);
  recipes::Node emb = node(OpKind::kEmbedding, 6);
  emb.attrs.vocab = 11;
  recipes::Node pos = node(OpKind::kPositionEmbedding);
  pos.attrs.context = 12;
  recipes::Node att2 = node(OpKind::kAttention);
  att2.attrs.heads = 2;
  recipes::Node att4 = node(OpKind::kAttention);
  att4.attrs.heads = 4;
  return {
      {"linear", flat_linear, {{5, 2, 3}}, 4},
      {"linear_rows_no_bias", seq_linear, {{3, 6}}, 2},
      {"linear_tied", tied, {{4, 6}}, 3},
      {"conv2d", node(OpKind::kConv2d, 6, 3, 1, 1), {{3, 8, 8}}, 3},
      {"conv2d_no_bias", no_bias, {{3, 8, 8}}, 2},
      {"conv2d_stride_pad", node(OpKind::kConv2d, 4, 5, 2, 2), {{2, 11, 9}}, 2},
      {"conv2d_grouped", node(OpKind::kConv2d, 8, 3, 1, 1, 2), {{4, 7, 7}}, 2},
      {"conv2d_alexnet1", node(OpKind::kConv2d, 8, 11, 4), {{3, 35, 35}}, 2},
      {"maxpool", node(OpKind::kMaxPool, 0, 2, 2), {{3, 8, 8}}, 2},
      {"maxpool_overlap", node(OpKind::kMaxPool, 0, 3, 2), {{2, 9, 9}}, 2},
      {"maxpool_ceil", max_ceil, {{2, 10, 8}}, 2},
      {"avgpool", node(OpKind::kAvgPool, 0, 3, 2), {{2, 9, 8}}, 2},
      {"avgpool_ceil_nocount", avg_nocount, {{2, 9, 8}}, 2},
      {"adaptive_avgpool", adaptive, {{3, 8, 7}}, 2},
      {"adaptive_global", global, {{4, 5, 5}}, 2},
      {"relu", node(OpKind::kRelu), {{3, 4, 4}}, 3},
      {"gelu", node(OpKind::kGelu), {{3, 8}}, 3},
      {"dropout", dropout, {{3, 4, 4}}, 3},
      {"lrn", lrn, {{7, 3, 3}}, 2},
      {"flatten", node(OpKind::kFlatten), {{2, 3, 3}}, 2},
      {"batchnorm", bn, {{4, 5, 5}}, 3},
      {"batchnorm_eval", bn, {{4, 5, 5}}, 3, false},
      {"batchnorm1d", bn, {{6}}, 8},
      {"layernorm", node(OpKind::kLayerNorm), {{5, 12}}, 2},
      {"add3", node(OpKind::kAdd), {{3, 4, 4}, {3, 4, 4}, {3, 4, 4}}, 2},
      {"concat3", node(OpKind::kConcat), {{2, 4, 4}, {3, 4, 4}, {1, 4, 4}}, 2},
      {"pad_channels", pad, {{4, 7, 6}}, 2},
      {"embedding", emb, {{9}}, 3},
      {"position_embedding", pos, {{9, 6}}, 3},
      {"attention_over_samples", att2, {{7, 24}}, 3},
      {"attention_over_heads", att4, {{6, 24}}, 2},
  };
}

// A GPU op and its CPU twin with the same random parameters, state, inputs and dout.
struct Pair {
  testing::CpuTwin cpu;
  std::unique_ptr<Op> gpu;
  std::vector<std::vector<float>> x;  // per input
  std::vector<float> dout, grads0;
  std::vector<std::vector<float>> din0;  // per input: what the gradient buffers start with
  DeviceBuffer d_params, d_grads, d_state, d_y, d_dout;
  std::vector<DeviceBuffer> d_x, d_din;
  bool acc = false;
};

bool tokens(const Case& c) { return c.node.op == OpKind::kEmbedding; }

Pair make_pair(GpuContext& ctx, const Case& c, uint64_t seed, bool acc) {
  Pair p;
  p.acc = acc;
  Rng rng(seed);
  p.cpu = testing::cpu_twin(c.node, c.in, c.batch, rng, acc);
  auto g = make_gpu_op(c.node, ctx);
  EXPECT_TRUE(g.ok());
  p.gpu = std::move(*g);
  auto st = p.gpu->setup(c.node, c.in, p.cpu.out);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t k = 0; k < c.in.size(); ++k) {
    const auto n = static_cast<size_t>(c.batch * recipes::numel(c.in[k]));
    std::vector<float> x = testing::normal_vector(n, rng);
    if (tokens(c))  // ids, a few outside [0, vocab) (both sides clamp them)
      for (auto& v : x) v = static_cast<float>(static_cast<int>(rng.below(14)) - 1);
    p.x.push_back(x);
    p.din0.push_back(acc ? testing::normal_vector(n, rng) : std::vector<float>(n, nan));
  }
  p.dout = testing::normal_vector(static_cast<size_t>(c.batch * p.cpu.out_numel()), rng);
  p.grads0 = acc ? testing::normal_vector(p.cpu.params.size(), rng)
                 : std::vector<float>(p.cpu.params.size(), nan);
  p.d_params = testing::upload(ctx, p.cpu.params);
  p.d_grads = testing::upload(ctx, p.grads0);
  p.d_state = testing::upload(ctx, p.cpu.state);
  p.cpu.grads = acc ? p.grads0 : std::vector<float>(p.grads0.size());
  p.cpu.bind(acc, c.batch);
  p.gpu->bind(split(p.d_params.floats(), p.cpu.sizes), split(p.d_grads.floats(), p.cpu.sizes),
              std::vector<bool>(p.cpu.sizes.size(), acc),
              split(p.d_state.floats(), p.cpu.state_sizes));
  p.gpu->reserve(c.batch);
  for (size_t k = 0; k < c.in.size(); ++k) {
    p.d_x.push_back(testing::upload(ctx, p.x[k]));
    p.d_din.push_back(testing::upload(ctx, p.din0[k]));
  }
  p.d_y = testing::upload(ctx, std::vector<float>(p.dout.size(), nan));
  p.d_dout = testing::upload(ctx, p.dout);
  return p;
}

std::vector<const float*> ptrs(const std::vector<std::vector<float>>& v) {
  std::vector<const float*> out;
  for (const auto& x : v) out.push_back(x.data());
  return out;
}
std::vector<const float*> ptrs(const std::vector<DeviceBuffer>& v) {
  std::vector<const float*> out;
  for (const auto& x : v) out.push_back(x.floats());
  return out;
}

// Which inputs get a gradient: all but token ids.
std::vector<GradOut> grad_outs(const Case& c, std::vector<float*> bufs, bool acc) {
  std::vector<GradOut> g;
  for (float* b : bufs) g.push_back(GradOut{tokens(c) ? nullptr : b, acc});
  return g;
}

class GpuLayerTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuLayerTest, MatchesCpu) {
  DLTUNE_GPU_OR_SKIP(ctx);
  const Case& c = GetParam();
  for (bool acc : {false, true}) {
    const std::string what = std::string(c.name) + (acc ? " (adding)" : " (writing)");
    Pair p = make_pair(*ctx, c, 7, acc);
    // CPU
    OpContext oc{p.cpu.workspace.data(), c.training, 1234, false};
    std::vector<float> y(p.dout.size());
    std::vector<std::vector<float>> din = p.din0;
    if (!acc)
      for (auto& d : din) d.assign(d.size(), 0.0f);
    auto x = ptrs(p.x);
    std::vector<float*> dbufs;
    for (auto& d : din) dbufs.push_back(d.data());
    auto gd = grad_outs(c, dbufs, acc);
    p.cpu.op->forward(oc, x.data(), y.data(), c.batch);
    p.cpu.op->backward(oc, x.data(), y.data(), p.dout.data(), gd.data(), c.batch);
    // GPU
    OpContext goc{nullptr, c.training, 1234, false};
    auto dx = ptrs(p.d_x);
    std::vector<float*> gbufs;
    for (auto& d : p.d_din) gbufs.push_back(d.floats());
    auto ggd = grad_outs(c, gbufs, acc);
    p.gpu->forward(goc, dx.data(), p.d_y.floats(), c.batch);
    p.gpu->backward(goc, dx.data(), p.d_y.floats(), p.d_dout.floats(), ggd.data(), c.batch);
    auto st = ctx->synchronize();
    ASSERT_TRUE(st.ok()) << what << ": " << st.error().message();
    const double tol = c.node.op == OpKind::kConv2d ? 5e-4 : 1e-4;
    auto gy = testing::download(*ctx, p.d_y.floats(), y.size());
    EXPECT_LT(testing::rel_error(gy, y), tol) << what << " forward";
    for (size_t k = 0; k < din.size() && !tokens(c); ++k) {
      auto g = testing::download(*ctx, p.d_din[k].floats(), din[k].size());
      EXPECT_LT(testing::rel_error(g, din[k]), tol) << what << " input " << k << " gradient";
    }
    if (!p.cpu.params.empty()) {
      auto gg = testing::download(*ctx, p.d_grads.floats(), p.cpu.params.size());
      EXPECT_LT(testing::rel_error(gg, p.cpu.grads), tol) << what << " parameter gradients";
    }
    if (!p.cpu.state.empty()) {
      auto gs = testing::download(*ctx, p.d_state.floats(), p.cpu.state.size());
      EXPECT_LT(testing::rel_error(gs, p.cpu.state), 1e-5) << what << " state";
    }
  }
}

// f = sum(op(x) * dout), evaluated on the GPU.
double objective(GpuContext& ctx, Pair& p, const Case& c) {
  OpContext oc{nullptr, c.training, 1234, false};
  auto x = ptrs(p.d_x);
  p.gpu->forward(oc, x.data(), p.d_y.floats(), c.batch);
  auto y = testing::download(ctx, p.d_y.floats(), p.dout.size());
  double f = 0.0;
  for (size_t i = 0; i < y.size(); ++i) f += double{y[i]} * p.dout[i];
  return f;
}

// Central differences over up to 12 coordinates of `host` (mirrored in `dev`).
void check_fd(GpuContext& ctx, Pair& p, const Case& c, std::vector<float>& host, DeviceBuffer& dev,
              const std::vector<float>& analytic, const std::string& what) {
  const float eps = 1e-2f;
  const size_t step = std::max<size_t>(1, host.size() / 12);
  for (size_t i = 0; i < host.size(); i += step) {
    const float keep = host[i];
    host[i] = keep + eps;
    ctx.to_device(dev.floats() + i, &host[i], sizeof(float));
    const double fp = objective(ctx, p, c);
    host[i] = keep - eps;
    ctx.to_device(dev.floats() + i, &host[i], sizeof(float));
    const double fm = objective(ctx, p, c);
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
  Pair p = make_pair(*ctx, c, 11, false);
  // Max pooling: a finite step must not change the argmax; spread the inputs apart.
  if (c.node.op == OpKind::kMaxPool) {
    auto& x = p.x[0];
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.05f * static_cast<float>((i * 37) % 101);
    ctx->to_device(p.d_x[0].data(), x.data(), x.size() * sizeof(float));
  }
  OpContext oc{nullptr, c.training, 1234, false};
  auto x = ptrs(p.d_x);
  std::vector<float*> gbufs;
  for (auto& d : p.d_din) gbufs.push_back(d.floats());
  auto gd = grad_outs(c, gbufs, false);
  p.gpu->forward(oc, x.data(), p.d_y.floats(), c.batch);
  p.gpu->backward(oc, x.data(), p.d_y.floats(), p.d_dout.floats(), gd.data(), c.batch);
  std::vector<std::vector<float>> din;
  for (size_t k = 0; k < p.d_din.size(); ++k)
    din.push_back(testing::download(*ctx, p.d_din[k].floats(), p.x[k].size()));
  auto grads = testing::download(*ctx, p.d_grads.floats(), p.cpu.params.size());
  for (size_t k = 0; k < din.size() && !tokens(c); ++k)
    check_fd(*ctx, p, c, p.x[k], p.d_x[k], din[k],
             std::string(c.name) + " input " + std::to_string(k));
  if (!p.cpu.params.empty())
    check_fd(*ctx, p, c, p.cpu.params, p.d_params, grads, std::string(c.name) + " params");
  auto st = ctx->synchronize();
  EXPECT_TRUE(st.ok()) << st.error().message();
}

INSTANTIATE_TEST_SUITE_P(Ops, GpuLayerTest, ::testing::ValuesIn(cases()),
                         [](const auto& tp) { return std::string(tp.param.name); });

}  // namespace
}  // namespace dltune::engine::gpu
