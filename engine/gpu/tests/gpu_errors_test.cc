// Runs in every build, with or without CUDA or a GPU: the GPU entry points fail with a clear
// reason when they cannot work, and the CPU dropout mask is the counter-based one the GPU
// dropout reproduces.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gpu/counter_hash.h"
#include "engine/gpu/gpu_context.h"
#include "engine/gpu/gpu_layers.h"
#include "engine/gpu/gpu_model.h"
#include "engine/ops/elementwise.h"
#include "engine/train/train_config.h"
#include "engine/train/trainer.h"

namespace dltune::engine::gpu {
namespace {

TEST(GpuErrors, DeviceCountSaysWhyNot) {
  auto n = gpu_device_count();
  if (!gpu_built()) {
    ASSERT_FALSE(n.ok());
    EXPECT_EQ(n.error().kind(), ErrorKind::kUnsupported);
    EXPECT_EQ(n.error().message(), kNoCudaBuild);
    return;
  }
  if (!n.ok()) {
    EXPECT_EQ(n.error().kind(), ErrorKind::kUnsupported);
    EXPECT_EQ(n.error().message().rfind("no CUDA device: cudaGetDeviceCount", 0), 0u)
        << n.error().message();
    return;
  }
  EXPECT_GE(*n, 1);
}

TEST(GpuErrors, ContextCreationFailsCleanly) {
  auto n = gpu_device_count();
  if (!n.ok()) {
    auto ctx = GpuContext::create(0);
    ASSERT_FALSE(ctx.ok());
    EXPECT_EQ(ctx.error().kind(), ErrorKind::kUnsupported);
    EXPECT_EQ(ctx.error().message(), n.error().message());
    auto buf = DeviceBuffer::alloc(16);
    EXPECT_FALSE(buf.ok());
    return;
  }
  auto ctx = GpuContext::create(*n);  // one past the last device
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(ctx.error().message().find("does not exist"), std::string::npos);
}

TEST(GpuErrors, CpuDropoutUsesTheCounterBasedMask) {
  recipes::Node n{"drop", recipes::OpKind::kDropout, {}, {}};
  n.attrs.p = 0.25;
  Dropout d;
  ASSERT_TRUE(d.setup(n, {{10, 10, 10}}, {10, 10, 10}).ok());
  const int B = 3;
  d.reserve(B);
  std::vector<float> x(B * 1000, 1.0f), y(x.size());
  OpContext oc{nullptr, true, 77, false, true};
  const float* in = x.data();
  d.forward(oc, &in, y.data(), B);
  int zeros = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const float expect = counter_uniform(77, i) < 0.25f ? 0.0f : 1.0f / 0.75f;
    ASSERT_EQ(y[i], expect) << i;
    zeros += y[i] == 0.0f;
  }
  EXPECT_NEAR(zeros / 3000.0, 0.25, 0.03);
  EXPECT_NE(counter_hash(77, 0), counter_hash(78, 0));
  EXPECT_NE(counter_hash(77, 0), counter_hash(77, 1));
}

}  // namespace
}  // namespace dltune::engine::gpu

namespace dltune::engine {
namespace {

TEST(GpuTrainConfig, DeviceKey) {
  auto c = parse_train_config(R"({"device": "gpu"})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->device, "gpu");
  auto back = parse_train_config(to_json(*c));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->device, "gpu");
  auto bad = parse_train_config(R"({"device": "tpu"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("key 'device'"), std::string::npos);
}

// Without a GPU the trainer refuses device gpu with the reason; with one, its losses follow the
// CPU trainer's for the same seed (dropout-free mlp, 5 steps).
TEST(GpuTrainer, DeviceGpuTrainsLikeCpuOrSaysWhy) {
  TrainConfig c;
  c.model = "mlp";
  c.steps = 5;
  c.train_size = 512;
  c.heldout_size = 0;
  auto data = load_dataset(c.data, true, c.train_size, c.seed);
  ASSERT_TRUE(data.ok());
  auto cpu = Trainer::create(c, nullptr, *data, nullptr);
  ASSERT_TRUE(cpu.ok());
  c.device = "gpu";
  auto gpu = Trainer::create(c, nullptr, *data, nullptr);
  if (auto n = gpu::gpu_device_count(); !n.ok()) {
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(gpu.error().message(), "device 'gpu': " + n.error().message());
    return;
  }
  ASSERT_TRUE(gpu.ok()) << gpu.error().message();
  for (int s = 0; s < 5; ++s) {
    auto a = (*cpu)->step(), b = (*gpu)->step();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NEAR(*b, *a, 1e-4 * std::max(1.0, std::abs(*a))) << "step " << s;
  }
}

}  // namespace
}  // namespace dltune::engine
