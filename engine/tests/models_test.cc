// Built-in models through the executor: exact parameter counts (Caffe's definitions,
// torchvision's), the shapes every node produces, the backward plan's buffer reuse, and clear
// errors for graphs that do not fit together.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>

#include "engine/graph/backward_plan.h"
#include "engine/graph/model.h"
#include "recipes/model/builtins.h"

namespace dltune::engine {
namespace {

Model build(const std::string& name, recipes::BuiltinOptions o = {}) {
  auto g = recipes::builtin_graph(name, o);
  EXPECT_TRUE(g.has_value()) << name;
  auto m = Model::build(*g, name);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message());
  return std::move(*m);
}

TEST(Models, ParameterCounts) {
  EXPECT_EQ(build("lenet").num_params(), 431080);      // caffe_lenet.prototxt
  EXPECT_EQ(build("alexnet").num_params(), 60965224);  // caffe_bvlc_alexnet_deploy.prototxt
  EXPECT_EQ(build("mlp").num_params(), 535818);
  EXPECT_EQ(build("lenet5").num_params(), 61706);
  EXPECT_EQ(build("resnet50").num_params(), 25557032);  // torchvision 0.14
  EXPECT_EQ(build("resnet20").num_params(), 269722);
  EXPECT_EQ(build("gpt2-small").num_params(), 124439808);
}

TEST(Models, BatchNormStateIsKeptApartFromParameters) {
  Model m = build("resnet20");
  // 19 batch norms of 16, 32 or 64 channels: running mean and variance each, plus a counter.
  EXPECT_EQ(m.info().state.size(), 19u * 3);
  EXPECT_EQ(m.num_state(), 2 * (16 * 7 + 32 * 6 + 64 * 6) + 19);
  m.init_params(1);
  int64_t n = 0;
  const float* var = m.find_tensor("layer2.0.bn1.running_var", &n);
  ASSERT_NE(var, nullptr);
  EXPECT_EQ(n, 32);
  EXPECT_EQ(var[0], 1.0f);
}

TEST(Models, BadGraphsAreRejectedWithTheNodeNamed) {
  recipes::Graph g;
  g.input = {3, 8, 8};
  recipes::OpAttrs c;
  c.out = 4, c.kernel = 3, c.groups = 2;
  g.nodes = {{"c1", recipes::OpKind::kConv2d, c, {}}};
  auto m = Model::build(g, "bad");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(m.error().message().find("node 'c1' (conv2d)"), std::string::npos)
      << m.error().message();
  EXPECT_NE(m.error().message().find("groups 2 must divide"), std::string::npos);
  g.nodes[0].attrs.groups = 1;
  g.nodes[0].attrs.kernel = 9;
  m = Model::build(g, "bad");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("does not fit"), std::string::npos);
}

TEST(Models, ForwardShapesOnAlexnetSizedInput) {
  Model m = build("alexnet");
  EXPECT_EQ(m.info().outputs[0], (recipes::Shape{96, 55, 55}));
  EXPECT_EQ(m.info().outputs[14], (recipes::Shape{256, 6, 6}));
}

// A deep network needs only a few activation-gradient buffers: each lives from its first
// reader's backward to its producer's.
TEST(Models, BackwardReusesGradientBuffers) {
  Model m = build("resnet110");
  BackwardPlan p = plan_backward(m.info());
  EXPECT_LE(p.slot_floats.size(), 6u) << "a CIFAR ResNet needs a handful of slots";
  Model chain = build("alexnet");
  EXPECT_EQ(plan_backward(chain.info()).slot_floats.size(), 2u);  // the old ping-pong pair
}

TEST(Models, ResnetForwardRunsOnAnyLargeEnoughInput) {
  recipes::BuiltinOptions o;
  o.input = {3, 64, 64};
  o.classes = 10;
  Model m = build("resnet18", o);
  m.init_params(3);
  m.reserve(2);
  std::vector<float> x(static_cast<size_t>(2 * m.input_numel()), 0.5f);
  const float* y = m.forward(x.data(), 2, false);
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(std::isfinite(y[i]));
}

}  // namespace
}  // namespace dltune::engine

namespace dltune::engine {
namespace {

// One training forward and backward of resnet20 on fixed data: the logits, every parameter
// gradient and the input gradient.
struct Pass {
  std::vector<float> logits, grads, dinput;
  int64_t activation_bytes = 0;
};

Pass resnet20_pass() {
  Model m = build("resnet20");
  m.init_params(3);
  const int B = 3;
  std::vector<float> x(static_cast<size_t>(B * m.input_numel()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * static_cast<float>(i));
  m.reserve(B);
  Pass p;
  const float* y = m.forward(x.data(), B, true, 0);
  p.logits.assign(y, y + B * m.output_numel());
  std::vector<float> dy(p.logits.size());
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = std::cos(0.3f * static_cast<float>(i));
  p.dinput.resize(x.size());
  m.backward(x.data(), dy.data(), B, {}, false, p.dinput.data());
  p.grads.assign(m.grads(), m.grads() + m.num_params());
  p.activation_bytes = m.activation_bytes();
  return p;
}

TEST(Models, AReluFusedIntoItsBatchNormOrAddChangesNoBit) {
  auto g = recipes::builtin_graph("resnet20", {});
  ASSERT_TRUE(g.has_value());
  const std::vector<int> fused = fused_relus(*g, recipes::analyze_graph(*g));
  // The stem's and each block's first batch norm (the second feeds the residual add), and the
  // nine blocks' adds.
  EXPECT_EQ(std::count_if(fused.begin(), fused.end(), [](int f) { return f >= 0; }), 19);
  EXPECT_EQ(std::count_if(fused.begin(), fused.end(),
                          [&](int f) { return f >= 0 && g->nodes[f].op == recipes::OpKind::kAdd; }),
            9);
  const Pass with = resnet20_pass();
  ASSERT_EQ(setenv("DLTUNE_FUSE", "0", 1), 0);
  const Pass without = resnet20_pass();
  unsetenv("DLTUNE_FUSE");
  EXPECT_EQ(with.logits, without.logits);
  EXPECT_EQ(with.grads, without.grads);
  EXPECT_EQ(with.dinput, without.dinput);
  // The fused ReLUs' outputs are not allocated: 19 of (16 x 32 x 32 ...) floats per sample.
  EXPECT_LT(with.activation_bytes, without.activation_bytes);
}

}  // namespace
}  // namespace dltune::engine
