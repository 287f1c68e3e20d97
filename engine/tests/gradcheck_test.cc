// Finite-difference gradient checks of every op and of whole graphs, through the executor.
//
// For a random input x and a fixed random projection r, the scalar f = sum(model(x) * r) has
// df/dx = backward(dout = r) and df/dparams = the parameter gradient; both are compared with
// central differences (relative tolerance). Running single ops through Model also checks the
// executor's gradient routing: graphs here read the input twice, tie weights and join branches,
// so sums of contributions (written first, then added) are checked as well.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/rng.h"
#include "engine/graph/model.h"
#include "engine/ops/loss.h"
#include "recipes/model/builtins.h"

namespace dltune::engine {
namespace {

using recipes::Graph;
using recipes::Node;
using recipes::OpAttrs;
using recipes::OpKind;
using recipes::Shape;

struct Check {
  Model model;
  int batch;
  std::vector<float> x, r;
  double objective() {
    const float* y = model.forward(x.data(), batch, true, 42);
    double f = 0.0;
    for (size_t i = 0; i < r.size(); ++i) f += double{y[i]} * r[i];
    return f;
  }
};

Check make(const Graph& g, int batch, uint64_t seed) {
  auto m = Model::build(g, "check");
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message());
  Check c{std::move(*m), batch, {}, {}};
  c.model.init_params(seed);
  Rng rng(seed);
  // Weights and biases both nonzero and not tiny, so the check exercises them.
  for (int64_t i = 0; i < c.model.num_params(); ++i) c.model.params()[i] += 0.1f * rng.normal();
  c.model.reserve(batch);
  c.x.resize(static_cast<size_t>(batch * c.model.input_numel()));
  for (auto& v : c.x)
    v = g.input_kind == recipes::InputKind::kTokens ? static_cast<float>(rng.below(7))
                                                    : rng.normal();
  c.r.resize(static_cast<size_t>(batch * c.model.output_numel()));
  for (auto& v : c.r) v = rng.normal();
  return c;
}

// Checks up to `samples` coordinates of v against finite differences of the objective.
void check_coords(Check& c, float* v, size_t n, const std::vector<float>& analytic,
                  const std::string& what, int samples) {
  const float eps = 1e-2f;
  const size_t step = std::max<size_t>(1, n / static_cast<size_t>(samples));
  for (size_t i = 0; i < n; i += step) {
    const float keep = v[i];
    v[i] = keep + eps;
    const double fp = c.objective();
    v[i] = keep - eps;
    const double fm = c.objective();
    v[i] = keep;
    const double num = (fp - fm) / (2.0 * eps);
    const double err = std::abs(num - analytic[i]) / std::max(1.0, std::abs(num));
    EXPECT_LT(err, 2e-2) << what << "[" << i << "]: numeric " << num << " analytic " << analytic[i];
  }
}

void gradcheck(const Graph& g, int batch = 2, uint64_t seed = 1) {
  Check c = make(g, batch, seed);
  c.objective();                              // forward (saves what backward needs)
  std::vector<float> dx(c.x.size(), 123.0f);  // must be overwritten, not added to
  const bool tokens = g.input_kind == recipes::InputKind::kTokens;
  int ready = 0;
  c.model.backward(
      c.x.data(), c.r.data(), batch, [&](int) { ++ready; }, false, tokens ? nullptr : dx.data());
  EXPECT_EQ(ready, c.model.num_nodes());
  std::vector<float> dparams(c.model.grads(), c.model.grads() + c.model.num_params());
  if (!tokens) check_coords(c, c.x.data(), c.x.size(), dx, "input", 60);
  if (c.model.num_params() > 0)
    check_coords(c, c.model.params(), static_cast<size_t>(c.model.num_params()), dparams, "param",
                 80);
}

// A graph of one op reading the input.
Graph one(OpKind op, OpAttrs a, Shape in) {
  Graph g;
  g.input = std::move(in);
  g.nodes.push_back(Node{"op", op, std::move(a), {"input"}});
  return g;
}
OpAttrs conv(int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0, int64_t groups = 1,
             bool bias = true) {
  OpAttrs a;
  a.out = out, a.kernel = k, a.stride = stride, a.pad = pad, a.groups = groups, a.bias = bias;
  return a;
}
OpAttrs pool(int64_t k, int64_t stride, int64_t pad = 0, bool ceil = false, bool cip = true) {
  OpAttrs a;
  a.kernel = k, a.stride = stride, a.pad = pad, a.ceil_mode = ceil, a.count_include_pad = cip;
  return a;
}
OpAttrs linear(int64_t out, bool flatten = false, bool bias = true) {
  OpAttrs a;
  a.out = out, a.flatten = flatten, a.bias = bias;
  return a;
}

TEST(Gradcheck, Linear) { gradcheck(one(OpKind::kLinear, linear(7, true), {5, 2, 3})); }
TEST(Gradcheck, LinearOverTheLastDimension) {
  gradcheck(one(OpKind::kLinear, linear(4, false, false), {3, 5}));
}
TEST(Gradcheck, Conv2d) { gradcheck(one(OpKind::kConv2d, conv(4, 3), {3, 6, 5})); }
TEST(Gradcheck, Conv2dStridePad) { gradcheck(one(OpKind::kConv2d, conv(3, 3, 2, 1), {2, 7, 6})); }
TEST(Gradcheck, Conv2dGroups) {
  gradcheck(one(OpKind::kConv2d, conv(6, 3, 1, 1, 2), {4, 5, 5}), 3);
}
TEST(Gradcheck, Conv2dLargeKernelStride) {
  gradcheck(one(OpKind::kConv2d, conv(2, 5, 3, 2), {1, 11, 9}));
}
TEST(Gradcheck, Conv2dWithoutBias) {
  gradcheck(one(OpKind::kConv2d, conv(3, 3, 1, 1, 1, false), {2, 5, 4}));
}
// 1x1, stride 1, no padding: the column-free path (GEMMs straight on the input planes).
TEST(Gradcheck, Conv2dPointwise) {
  gradcheck(one(OpKind::kConv2d, conv(5, 1, 1, 0, 1, false), {4, 3, 5}), 3);
}
TEST(Gradcheck, Conv2dStridedPointwise) {
  gradcheck(one(OpKind::kConv2d, conv(5, 1, 2, 0, 1, false), {4, 5, 5}));
}
// One input channel, stride 1: the direct kernels (engine/ops/conv_direct.h). Width 37 with
// pad 2 gives 37 output columns: a block of 32 and a partial block of 8.
TEST(Gradcheck, Conv2dOneChannelDirect) {
  gradcheck(one(OpKind::kConv2d, conv(3, 5, 1, 2), {1, 6, 37}));
}
TEST(Gradcheck, Conv2dOneChannelDirectSmall) {
  gradcheck(one(OpKind::kConv2d, conv(2, 3), {1, 5, 9}), 3);
}
TEST(Gradcheck, MaxPool) { gradcheck(one(OpKind::kMaxPool, pool(2, 2), {3, 6, 6})); }
TEST(Gradcheck, MaxPoolOverlap) { gradcheck(one(OpKind::kMaxPool, pool(3, 2), {2, 7, 7})); }
TEST(Gradcheck, MaxPoolCeilModePadded) {
  gradcheck(one(OpKind::kMaxPool, pool(3, 2, 1, true), {2, 8, 8}));
}
TEST(Gradcheck, AvgPool) { gradcheck(one(OpKind::kAvgPool, pool(3, 2), {2, 7, 8})); }
TEST(Gradcheck, AvgPoolCeilModeWithoutPadCounting) {
  gradcheck(one(OpKind::kAvgPool, pool(3, 2, 1, true, false), {2, 8, 7}));
}
TEST(Gradcheck, AdaptiveAvgPool) {
  OpAttrs a;
  a.out_h = 3, a.out_w = 2;
  gradcheck(one(OpKind::kAdaptiveAvgPool, a, {2, 7, 5}));
}
TEST(Gradcheck, Relu) { gradcheck(one(OpKind::kRelu, {}, {4, 3, 3})); }
TEST(Gradcheck, Gelu) { gradcheck(one(OpKind::kGelu, {}, {3, 7})); }
TEST(Gradcheck, Dropout) {
  OpAttrs a;
  a.p = 0.3;
  gradcheck(one(OpKind::kDropout, a, {4, 3, 3}));
}
TEST(Gradcheck, Lrn) {
  OpAttrs a;
  a.size = 5, a.alpha = 0.5, a.beta = 0.75, a.k = 1.0;
  gradcheck(one(OpKind::kLrn, a, {7, 3, 2}));
}
TEST(Gradcheck, Flatten) { gradcheck(one(OpKind::kFlatten, {}, {2, 3, 3})); }
TEST(Gradcheck, BatchNormTraining) { gradcheck(one(OpKind::kBatchNorm, {}, {3, 4, 2}), 3); }
TEST(Gradcheck, BatchNormOverFeatures) { gradcheck(one(OpKind::kBatchNorm, {}, {5}), 4); }
TEST(Gradcheck, LayerNorm) { gradcheck(one(OpKind::kLayerNorm, {}, {3, 6}), 2); }
TEST(Gradcheck, PadChannels) {
  OpAttrs a;
  a.out = 6, a.stride = 2;
  gradcheck(one(OpKind::kPadChannels, a, {2, 5, 4}));
}
TEST(Gradcheck, CausalAttention) {
  OpAttrs a;
  a.heads = 2;
  gradcheck(one(OpKind::kAttention, a, {5, 12}), 2);
}
TEST(Gradcheck, PositionEmbedding) {
  OpAttrs a;
  a.context = 6;
  gradcheck(one(OpKind::kPositionEmbedding, a, {4, 3}));
}

// The input read by two branches, joined by add or concat: the input's gradient is the sum of
// both branches' contributions (one written, one added). GELU rather than ReLU after them: an
// input feeds many outputs, and finite differences across ReLU kinks would not be gradients.
Graph two_branches(OpKind join) {
  Graph g;
  g.input = {3, 5, 5};
  g.nodes = {{"a", OpKind::kConv2d, conv(4, 3, 1, 1), {"input"}},
             {"b", OpKind::kConv2d, conv(join == OpKind::kAdd ? 4 : 2, 1), {"input"}},
             {"join", join, {}, {"a", "b"}},
             {"act", OpKind::kGelu, {}, {"join"}}};
  return g;
}
TEST(Gradcheck, AddOfTwoBranches) { gradcheck(two_branches(OpKind::kAdd), 2); }
TEST(Gradcheck, ConcatOfTwoBranches) { gradcheck(two_branches(OpKind::kConcat), 2); }
TEST(Gradcheck, ResidualWithIdentityShortcut) {
  Graph g;
  g.input = {4, 4, 4};
  g.nodes = {{"c1", OpKind::kConv2d, conv(4, 3, 1, 1, 1, false), {"input"}},
             {"bn", OpKind::kBatchNorm, {}, {"c1"}},
             {"r", OpKind::kGelu, {}, {"bn"}},
             {"c2", OpKind::kConv2d, conv(4, 3, 1, 1, 1, false), {"r"}},
             {"sum", OpKind::kAdd, {}, {"c2", "input"}},
             {"out", OpKind::kGelu, {}, {"sum"}}};
  gradcheck(g, 3);
}

// Token embedding with a head tied to it: the table's gradient is the sum of both uses.
TEST(Gradcheck, TiedEmbeddingAndHead) {
  Graph g;
  g.input = {5};
  g.input_kind = recipes::InputKind::kTokens;
  OpAttrs emb;
  emb.vocab = 7, emb.out = 4;
  OpAttrs head = linear(7, false, false);
  head.tie = "wte.weight";
  g.nodes = {{"wte", OpKind::kEmbedding, emb, {"input"}},
             {"ln", OpKind::kLayerNorm, {}, {"wte"}},
             {"head", OpKind::kLinear, head, {"ln"}}};
  gradcheck(g, 2);
}

// A whole GPT block stack (2 blocks): every parameter against finite differences.
TEST(Gradcheck, TinyGpt) {
  recipes::BuiltinOptions o;
  o.blocks = 2, o.width = 8, o.heads = 2, o.context = 6, o.vocab = 7;
  auto g = recipes::builtin_graph("gpt-tiny", o);
  ASSERT_TRUE(g.has_value());
  gradcheck(*g, 2, 3);
}

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

// The whole chain model the old engine trained: every parameter against finite differences of
// the mean loss, and the ready signals in reverse node order.
TEST(Gradcheck, WholeSmallChain) {
  std::vector<Node> layers;
  auto add = [&](OpKind op, OpAttrs a = {}) { layers.push_back(Node{"", op, a, {}}); };
  OpAttrs lrn;
  lrn.size = 3, lrn.alpha = 0.2, lrn.beta = 0.75;
  add(OpKind::kConv2d, conv(4, 3, 1, 1, 2));
  add(OpKind::kRelu);
  add(OpKind::kLrn, lrn);
  add(OpKind::kMaxPool, pool(2, 2));
  add(OpKind::kConv2d, conv(6, 3));
  add(OpKind::kAvgPool, pool(2, 1));
  add(OpKind::kFlatten);
  add(OpKind::kLinear, linear(8));
  add(OpKind::kRelu);
  add(OpKind::kLinear, linear(4));
  auto m = Model::build(recipes::chain_graph({2, 8, 8}, layers), "tiny");
  ASSERT_TRUE(m.ok()) << m.error().message();
  const int B = 3;
  m->init_params(5);
  m->reserve(B);
  Rng rng(9);
  std::vector<float> x(static_cast<size_t>(B * m->input_numel()));
  for (auto& v : x) v = rng.normal();
  std::vector<int32_t> y = {1, 3, 0};
  std::vector<float> dz(B * 4);
  auto loss = [&] {
    const float* z = m->forward(x.data(), B, true, 1);
    return softmax_cross_entropy(z, y.data(), B, 4, B, nullptr) / B;
  };
  const float* z = m->forward(x.data(), B, true, 1);
  softmax_cross_entropy(z, y.data(), B, 4, B, dz.data());
  int last = m->num_nodes();
  m->backward(x.data(), dz.data(), B, [&](int node) {
    EXPECT_EQ(node, last - 1);  // reverse node order
    last = node;
  });
  EXPECT_EQ(last, 0);
  std::vector<float> g(m->grads(), m->grads() + m->num_params());
  float* p = m->params();
  for (int64_t i = 0; i < m->num_params(); i += 3) {
    const float keep = p[i];
    p[i] = keep + 1e-2f;
    double fp = loss();
    p[i] = keep - 1e-2f;
    double fm = loss();
    p[i] = keep;
    double num = (fp - fm) / 2e-2;
    EXPECT_NEAR(num, g[static_cast<size_t>(i)], 2e-3 + 2e-2 * std::abs(num)) << "param " << i;
  }
}

}  // namespace
}  // namespace dltune::engine
