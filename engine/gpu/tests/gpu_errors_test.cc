// Runs in every build, with or without CUDA or a GPU: the GPU entry points fail with a clear
// reason when they cannot work, and the CPU dropout mask is the counter-based one the GPU
// dropout reproduces. The trainer cases say why without a GPU and, with one, train like the CPU
// trainer (AdamW, clipping, micro-batches, batch norm, a GPT on text), evaluate like it, and
// write checkpoints the CPU trainer resumes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "engine/gpu/counter_hash.h"
#include "engine/gpu/gpu_context.h"
#include "engine/gpu/gpu_layers.h"
#include "engine/gpu/gpu_model.h"
#include "engine/ops/elementwise.h"
#include "engine/train/train_config.h"
#include "engine/train/train_data.h"
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

// A temporary directory, removed with the object.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/dltune-gpu-test-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path = tmpl;
  }
  ~TempDir() {
    if (!path.empty()) (void)std::system(("rm -rf " + path).c_str());
  }
};

// Trains `c` on the CPU and on the GPU side by side for `steps` steps (the losses must agree),
// compares their held-out evaluation, then checks that the GPU trainer's checkpoint (parameters,
// batch-norm statistics, optimizer moments and step count) resumes on the CPU: one more step
// from it gives the GPU trainer's next loss. Without a GPU, creating the GPU trainer must fail
// with the device's reason (the optimizer, clipping and micro-batches are all GPU-capable, so
// nothing else may refuse first).
void gpu_trains_like_cpu_or_says_why(TrainConfig c, const Dataset& train, const Dataset* heldout,
                                     int steps) {
  c.device = "cpu";
  auto cpu = Trainer::create(c, nullptr, train, heldout);
  ASSERT_TRUE(cpu.ok()) << cpu.error().message();
  c.device = "gpu";
  auto gpu = Trainer::create(c, nullptr, train, heldout);
  if (auto n = gpu::gpu_device_count(); !n.ok()) {
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(gpu.error().message(), "device 'gpu': " + n.error().message());
    return;
  }
  ASSERT_TRUE(gpu.ok()) << gpu.error().message();
  for (int s = 0; s < steps; ++s) {
    auto a = (*cpu)->step(), b = (*gpu)->step();
    ASSERT_TRUE(a.ok() && b.ok()) << (b.ok() ? "" : b.error().message());
    EXPECT_NEAR(*b, *a, 1e-3 * std::max(1.0, std::abs(*a))) << c.model << " step " << s;
  }
  if (heldout) {
    auto ea = (*cpu)->evaluate(), eb = (*gpu)->evaluate();
    ASSERT_TRUE(ea.ok() && eb.ok()) << (eb.ok() ? "" : eb.error().message());
    EXPECT_NEAR(eb->loss, ea->loss, 1e-3 * std::max(1.0, std::abs(ea->loss))) << c.model;
  }
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string path = dir.path + "/ck.bin";
  ASSERT_TRUE((*gpu)->save(path).ok());
  c.device = "cpu";
  auto resumed = Trainer::create(c, nullptr, train, heldout);
  ASSERT_TRUE(resumed.ok());
  auto st = (*resumed)->resume(path);
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ((*resumed)->steps_done(), steps);
  auto a = (*resumed)->step(), b = (*gpu)->step();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(*b, *a, 1e-3 * std::max(1.0, std::abs(*a))) << c.model << " after resuming";
}

TEST(GpuTrainer, ResNetWithAdamWClippingAndMicroBatches) {
  TrainConfig c;
  c.model = "resnet20";
  c.data = "synthetic-cifar";
  c.train_size = 64;
  c.heldout_size = 16;
  c.global_batch = 8;
  c.microbatches = 2;
  c.optimizer = "adamw";
  c.lr = 1e-3;
  c.weight_decay = 0.05;
  c.clip_grad_norm = 1.0;
  c.steps = 4;
  c.seed = 3;
  Dataset train = synthetic_cifar(c.train_size, c.seed);
  Dataset heldout = synthetic_cifar(c.heldout_size, c.seed + 1);
  gpu_trains_like_cpu_or_says_why(c, train, &heldout, 3);
}

TEST(GpuTrainer, GptOnTextWithAdamW) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string text = dir.path + "/text.txt";
  {
    std::FILE* f = std::fopen(text.c_str(), "w");
    ASSERT_NE(f, nullptr);
    for (int i = 0; i < 400; ++i)
      std::fprintf(f, "line %d: the quick brown fox %d jumps over the lazy dog.\n", i, i * 7);
    std::fclose(f);
  }
  TrainConfig c;
  c.model = "gpt-tiny";
  c.input = {32};
  c.data = "text:" + text;
  c.heldout_split = 0.02;
  c.global_batch = 4;
  c.microbatches = 2;
  c.optimizer = "adamw";
  c.lr = 1e-3;
  c.weight_decay = 0.1;
  c.clip_grad_norm = 1.0;
  c.steps = 4;
  Dataset train, heldout;
  ASSERT_TRUE(load_train_data(c, &train, &heldout).ok());
  gpu_trains_like_cpu_or_says_why(c, train, &heldout, 3);
}

}  // namespace
}  // namespace dltune::engine
