// GpuModel against the CPU Model: the same layout, then N SGD steps from the same parameters
// on the same data (with dropout: the same masks) give the same losses and parameters. And the
// graph ops without a GPU kernel yet are refused with the node named.
#include "engine/gpu/gpu_model.h"

#include <vector>

#include <gtest/gtest.h>

#include "engine/gpu/gpu_ops.h"
#include "engine/gpu/tests/gpu_test_util.h"
#include "engine/graph/rng.h"
#include "engine/ops/loss.h"
#include "engine/optim/optimizer.h"
#include "recipes/model/builtins.h"

namespace dltune::engine::gpu {
namespace {

using recipes::OpKind;

recipes::Graph small_grouped() {
  std::vector<recipes::Node> l;
  auto add = [&](OpKind op, int64_t out = 0, int64_t k = 0, int64_t stride = 1, int64_t pad = 0,
                 int64_t groups = 1) {
    recipes::Node n{"", op, {}, {}};
    n.attrs.out = out, n.attrs.kernel = k, n.attrs.stride = stride, n.attrs.pad = pad;
    n.attrs.groups = groups;
    if (op == OpKind::kLrn) n.attrs.alpha = 1e-2;
    if (op == OpKind::kDropout) n.attrs.p = 0.3;
    l.push_back(n);
  };
  add(OpKind::kConv2d, 8, 3, 1, 1);
  add(OpKind::kRelu);
  add(OpKind::kLrn);
  add(OpKind::kMaxPool, 0, 2, 2);
  add(OpKind::kConv2d, 8, 3, 1, 1, 2);
  add(OpKind::kRelu);
  add(OpKind::kAvgPool, 0, 2, 2);
  add(OpKind::kFlatten);
  add(OpKind::kLinear, 32);
  add(OpKind::kRelu);
  add(OpKind::kDropout);
  add(OpKind::kLinear, 5);
  return recipes::chain_graph({3, 16, 16}, l);
}

recipes::Graph graph_named(const std::string& name) {
  if (name == "small-grouped") return small_grouped();
  auto g = recipes::builtin_graph(name, {});
  EXPECT_TRUE(g.has_value());
  return *g;
}

class GpuModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuModelTest, TrainsLikeTheCpuModel) {
  DLTUNE_GPU_OR_SKIP(ctx);
  const recipes::Graph graph = graph_named(GetParam());
  auto cpu = Model::build(graph, GetParam());
  ASSERT_TRUE(cpu.ok());
  auto gpu = GpuModel::build(graph, GetParam(), *ctx);
  ASSERT_TRUE(gpu.ok()) << gpu.error().message();
  GpuModel& g = **gpu;
  ASSERT_EQ(g.num_params(), cpu->num_params());

  const int B = 16, K = static_cast<int>(cpu->output_numel());
  const int64_t n = cpu->num_params();
  cpu->init_params(3);
  ASSERT_TRUE(g.copy_params_from(*cpu).ok());
  std::vector<float> from_gpu(static_cast<size_t>(n));
  ASSERT_TRUE(g.copy_params_to(from_gpu.data()).ok());
  EXPECT_EQ(testing::rel_error(from_gpu, std::vector<float>(cpu->params(), cpu->params() + n)), 0.0)
      << "copy_params_from differs";
  cpu->reserve(B);
  ASSERT_TRUE(g.reserve(B).ok());

  Rng rng(5);
  std::vector<float> x(static_cast<size_t>(B * cpu->input_numel()));
  for (auto& v : x) v = rng.normal();
  std::vector<int32_t> labels(B);
  for (auto& l : labels) l = static_cast<int32_t>(rng.below(static_cast<uint64_t>(K)));
  DeviceBuffer d_x = testing::upload(*ctx, x);
  auto d_labels = DeviceBuffer::alloc(sizeof(int32_t) * B);
  ASSERT_TRUE(d_labels.ok());
  ctx->to_device(d_labels->data(), labels.data(), sizeof(int32_t) * B);
  auto d_dlogits = DeviceBuffer::alloc_floats(static_cast<size_t>(B * K));
  auto d_rows = DeviceBuffer::alloc(sizeof(double) * B);
  auto d_velocity = DeviceBuffer::alloc_floats(static_cast<size_t>(n));
  ASSERT_TRUE(d_dlogits.ok() && d_rows.ok() && d_velocity.ok());

  Sgd sgd(n, 0.9f, 5e-4f);
  std::vector<float> dlogits(static_cast<size_t>(B * K));
  const float lr = 0.05f;
  for (int step = 0; step < 5; ++step) {
    const uint64_t seed = 100 + step;
    const float* logits = cpu->forward(x.data(), B, true, seed);
    const double cpu_loss = engine::softmax_cross_entropy(logits, labels.data(), B, K,
                                                          static_cast<float>(B), dlogits.data());
    cpu->backward(x.data(), dlogits.data(), B);
    sgd.step(cpu->params(), cpu->grads(), lr);

    auto glogits = g.forward(d_x.floats(), B, true, seed);
    ASSERT_TRUE(glogits.ok()) << glogits.error().message();
    softmax_cross_entropy(*ctx, *glogits, d_labels->as<int32_t>(), B, K, static_cast<float>(B),
                          d_dlogits->floats(), d_rows->as<double>());
    std::vector<double> rows(B);
    ctx->to_host(rows.data(), d_rows->data(), sizeof(double) * B);
    auto st = g.backward(d_x.floats(), d_dlogits->floats(), B);
    ASSERT_TRUE(st.ok()) << st.error().message();
    sgd_step(*ctx, g.params(), g.grads(), d_velocity->floats(), n, lr, 0.9f, 5e-4f);
    ASSERT_TRUE(ctx->synchronize().ok());
    double gpu_loss = 0.0;
    for (double r : rows) gpu_loss += r;
    EXPECT_NEAR(gpu_loss / B, cpu_loss / B, 1e-4 * std::max(1.0, std::abs(cpu_loss / B)))
        << GetParam() << " step " << step;
  }
  ASSERT_TRUE(g.copy_params_to(from_gpu.data()).ok());
  EXPECT_LT(testing::rel_error(from_gpu, std::vector<float>(cpu->params(), cpu->params() + n)),
            1e-3)
      << GetParam() << " parameters after 5 steps";
}

INSTANTIATE_TEST_SUITE_P(Models, GpuModelTest, ::testing::Values("mlp", "lenet", "small-grouped"),
                         [](const auto& tp) {
                           std::string s = tp.param;
                           for (auto& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

TEST(GpuModel, RejectsAnotherLayout) {
  DLTUNE_GPU_OR_SKIP(ctx);
  auto cpu = Model::build(graph_named("mlp"), "mlp");
  auto gpu = GpuModel::build(graph_named("lenet"), "lenet", *ctx);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  auto st = (*gpu)->copy_params_from(*cpu);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kInvalidInput);
}

// Batch norm, residual adds and attention have no GPU kernels yet: building says so, naming
// the node, instead of training something else.
TEST(GpuModel, RefusesOpsWithoutAGpuKernel) {
  DLTUNE_GPU_OR_SKIP(ctx);
  auto gpu = GpuModel::build(graph_named("resnet20"), "resnet20", *ctx);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.error().kind(), ErrorKind::kUnsupported);
  EXPECT_NE(gpu.error().message().find("node 'bn1' (batchnorm)"), std::string::npos)
      << gpu.error().message();
}

}  // namespace
}  // namespace dltune::engine::gpu
