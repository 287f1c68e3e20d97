// GpuModel against the CPU Model: the same layout, then N SGD steps from the same parameters
// on the same data (with dropout: the same masks) give the same losses and parameters.
#include "engine/gpu/gpu_model.h"

#include <vector>

#include <gtest/gtest.h>

#include "engine/gpu/gpu_ops.h"
#include "engine/gpu/tests/gpu_test_util.h"
#include "engine/loss.h"
#include "engine/models.h"
#include "engine/optimizer.h"

namespace dltune::engine::gpu {
namespace {

ModelSpec small_grouped() {
  using L = LayerSpec;
  return {"small-grouped",
          {3, 16, 16},
          5,
          {L::conv(8, 3, 1, 1), L::relu(), L::lrn(5, 1e-2f, 0.75f), L::maxpool(2, 2),
           L::conv(8, 3, 1, 1, 2), L::relu(), L::avgpool(2, 2), L::flatten(), L::linear(32),
           L::relu(), L::dropout(0.3f), L::linear(5)}};
}

ModelSpec spec_named(const std::string& name) {
  if (name == "small-grouped") return small_grouped();
  auto s = builtin_model(name);
  EXPECT_TRUE(s.ok());
  return *s;
}

class GpuModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuModelTest, TrainsLikeTheCpuModel) {
  DLTUNE_GPU_OR_SKIP(ctx);
  const ModelSpec spec = spec_named(GetParam());
  auto cpu = Model::build(spec);
  ASSERT_TRUE(cpu.ok());
  auto gpu = GpuModel::build(spec, *ctx);
  ASSERT_TRUE(gpu.ok()) << gpu.error().message();
  GpuModel& g = **gpu;
  ASSERT_EQ(g.num_params(), cpu->num_params());
  for (int i = 0; i < g.num_layers(); ++i) EXPECT_EQ(g.param_offset(i), cpu->param_offset(i));

  const int B = 16, K = spec.classes;
  const int64_t n = cpu->num_params();
  cpu->init_params(3);
  ASSERT_TRUE(g.init_params(3).ok());
  std::vector<float> from_gpu(static_cast<size_t>(n));
  ASSERT_TRUE(g.copy_params_to(from_gpu.data()).ok());
  EXPECT_EQ(testing::rel_error(from_gpu, std::vector<float>(cpu->params(), cpu->params() + n)), 0.0)
      << "init_params differs";
  cpu->reserve(B);
  ASSERT_TRUE(g.reserve(B).ok());

  Rng rng(5);
  std::vector<float> x(static_cast<size_t>(B * spec.input.size()));
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
  auto cpu = Model::build(spec_named("mlp"));
  auto gpu = GpuModel::build(spec_named("lenet"), *ctx);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  auto st = (*gpu)->copy_params_from(*cpu);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kInvalidInput);
}

}  // namespace
}  // namespace dltune::engine::gpu
