// GpuModel against the CPU Model: the same layout, then N optimizer steps from the same
// parameters on the same data (with dropout: the same masks) give the same losses, parameters
// and batch-norm statistics. The models cover every op kind: the 2012 chains, resnet20 (batch
// norm, residual adds, pad_channels, adaptive pooling) and gpt-tiny (embeddings, layer norm,
// attention, GELU, residual adds, the tied head) trained with AdamW and clipping, and gradient
// accumulation over two micro-batches. Skips without a GPU.
#include "engine/gpu/gpu_model.h"

#include <vector>

#include <gtest/gtest.h>

#include "engine/core/rng.h"
#include "engine/gpu/gpu_ops.h"
#include "engine/gpu/offload.h"
#include "engine/gpu/tests/gpu_test_util.h"
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
  recipes::BuiltinOptions o;
  if (name == "gpt-tiny") o.input = {32};  // 32 positions keep the CPU side quick
  auto g = recipes::builtin_graph(name, o);
  EXPECT_TRUE(g.has_value());
  return *g;
}

struct ModelCase {
  std::string model;
  int batch = 16;
  int steps = 5;
  bool adamw = false;       // with clipping at 1.0; else SGD
  int microbatches = 1;     // gradient accumulation over this many chunks
  double loss_tol = 1e-4;   // relative, per step
  double param_tol = 1e-3;  // norm-wise relative, after the steps
};

// Trains the CPU and the GPU model side by side and compares them.
void train_side_by_side(GpuContext& ctx, const ModelCase& mc) {
  const recipes::Graph graph = graph_named(mc.model);
  auto cpu = Model::build(graph, mc.model);
  ASSERT_TRUE(cpu.ok());
  auto gpu = GpuModel::build(graph, mc.model, ctx);
  ASSERT_TRUE(gpu.ok()) << gpu.error().message();
  GpuModel& g = **gpu;
  ASSERT_EQ(g.num_params(), cpu->num_params());
  ASSERT_EQ(g.num_state(), cpu->num_state());

  const int B = mc.batch, M = mc.microbatches;
  const int K = static_cast<int>(cpu->output_shape().back());
  const int P = static_cast<int>(cpu->output_numel() / K);  // predictions per sample
  const int64_t n = cpu->num_params();
  cpu->init_params(3);
  ASSERT_TRUE(g.copy_params_from(*cpu).ok());
  std::vector<float> from_gpu(static_cast<size_t>(n));
  ASSERT_TRUE(g.copy_params_to(from_gpu.data()).ok());
  EXPECT_EQ(testing::rel_error(from_gpu, std::vector<float>(cpu->params(), cpu->params() + n)), 0.0)
      << "copy_params_from differs";
  const int chunk = (B + M - 1) / M;
  cpu->reserve(chunk);
  ASSERT_TRUE(g.reserve(chunk).ok());

  Rng rng(5);
  const bool text = graph.input_kind == recipes::InputKind::kTokens;
  std::vector<float> x(static_cast<size_t>(B * cpu->input_numel()));
  for (auto& v : x)
    v = text ? static_cast<float>(rng.below(static_cast<uint64_t>(K))) : rng.normal();
  std::vector<int32_t> labels(static_cast<size_t>(B * P));
  for (auto& l : labels) l = static_cast<int32_t>(rng.below(static_cast<uint64_t>(K)));
  DeviceBuffer d_x = testing::upload(ctx, x);
  auto d_labels = DeviceBuffer::alloc(sizeof(int32_t) * labels.size());
  ASSERT_TRUE(d_labels.ok());
  ctx.to_device(d_labels->data(), labels.data(), sizeof(int32_t) * labels.size());
  auto d_dlogits = DeviceBuffer::alloc_floats(static_cast<size_t>(chunk * P * K));
  auto d_rows = DeviceBuffer::alloc(sizeof(double) * labels.size());
  auto d_m = DeviceBuffer::alloc_floats(static_cast<size_t>(n));
  auto d_v = DeviceBuffer::alloc_floats(static_cast<size_t>(n));
  auto d_norm = DeviceBuffer::alloc(sizeof(double) * clip_scratch_doubles());
  ASSERT_TRUE(d_dlogits.ok() && d_rows.ok() && d_m.ok() && d_v.ok() && d_norm.ok());

  std::unique_ptr<Optimizer> opt;
  if (mc.adamw)
    opt = std::make_unique<AdamW>(n, 0.9f, 0.95f, 1e-8f, 0.1f);
  else
    opt = std::make_unique<Sgd>(n, 0.9f, 5e-4f);
  std::vector<float> dlogits(static_cast<size_t>(chunk * P * K));
  const float lr = mc.adamw ? 1e-3f : 0.05f;
  const float denom = static_cast<float>(B * P);
  for (int step = 0; step < mc.steps; ++step) {
    const uint64_t seed = 100 + step;
    double cpu_loss = 0.0;
    int offset = 0;
    for (int m = 0; m < M; ++m) {  // as Trainer::compute_cpu / compute_gpu
      const int b = B / M + (m < B % M ? 1 : 0);
      const float* xc = x.data() + offset * cpu->input_numel();
      const float* logits = cpu->forward(xc, b, true, seed + 1000 * m);
      cpu_loss += engine::softmax_cross_entropy(logits, labels.data() + offset * P, b * P, K, denom,
                                                dlogits.data());
      cpu->backward(xc, dlogits.data(), b, {}, m > 0);

      const float* gx = d_x.floats() + offset * cpu->input_numel();
      auto glogits = g.forward(gx, b, true, seed + 1000 * m);
      ASSERT_TRUE(glogits.ok()) << glogits.error().message();
      softmax_cross_entropy(ctx, *glogits, d_labels->as<int32_t>() + offset * P, b * P, K, denom,
                            d_dlogits->floats(), d_rows->as<double>() + offset * P);
      auto st = g.backward(gx, d_dlogits->floats(), b, {}, m > 0);
      ASSERT_TRUE(st.ok()) << st.error().message();
      offset += b;
    }
    std::vector<double> rows(labels.size());
    ctx.to_host(rows.data(), d_rows->data(), sizeof(double) * rows.size());
    if (mc.adamw) {
      engine::clip_grad_norm(cpu->grads(), n, 1.0);
      opt->step(cpu->params(), cpu->grads(), lr);
      clip_grad_norm(ctx, g.grads(), n, 1.0, d_norm->as<double>());
      adamw_step(ctx, g.params(), g.grads(), d_m->floats(), d_v->floats(), n, lr, 0.9f, 0.95f,
                 1e-8f, 0.1f, opt->steps());
    } else {
      opt->step(cpu->params(), cpu->grads(), lr);
      sgd_step(ctx, g.params(), g.grads(), d_m->floats(), n, lr, 0.9f, 5e-4f);
    }
    auto st = ctx.synchronize();
    ASSERT_TRUE(st.ok()) << st.error().message();
    double gpu_loss = 0.0;
    for (double r : rows) gpu_loss += r;
    const double scale = static_cast<double>(B) * P;
    EXPECT_NEAR(gpu_loss / scale, cpu_loss / scale,
                mc.loss_tol * std::max(1.0, std::abs(cpu_loss / scale)))
        << mc.model << " step " << step;
  }
  ASSERT_TRUE(g.copy_params_to(from_gpu.data()).ok());
  EXPECT_LT(testing::rel_error(from_gpu, std::vector<float>(cpu->params(), cpu->params() + n)),
            mc.param_tol)
      << mc.model << " parameters after " << mc.steps << " steps";
  if (cpu->num_state() > 0) {
    std::vector<float> state(static_cast<size_t>(cpu->num_state()));
    ASSERT_TRUE(g.copy_state_to(state.data()).ok());
    EXPECT_LT(testing::rel_error(state,
                                 std::vector<float>(cpu->state(), cpu->state() + cpu->num_state())),
              mc.param_tol)
        << mc.model << " batch-norm statistics";
  }
}

class GpuModelTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(GpuModelTest, TrainsLikeTheCpuModel) {
  DLTUNE_GPU_OR_SKIP(ctx);
  train_side_by_side(*ctx, GetParam());
}

std::string case_name(const ModelCase& mc) {
  std::string s = mc.model + (mc.microbatches > 1 ? "_micro" : "");
  for (auto& ch : s)
    if (ch == '-') ch = '_';
  return s;
}

// AdamW normalises each update, so elements whose gradient is rounding noise on both sides move
// by up to 2 lr apart: its parameters get a looser bound than SGD's (the losses do not).
INSTANTIATE_TEST_SUITE_P(Models, GpuModelTest,
                         ::testing::Values(ModelCase{"mlp"}, ModelCase{"lenet"},
                                           ModelCase{"small-grouped"},
                                           ModelCase{"resnet20", 16, 4, false, 1, 2e-4, 2e-3},
                                           ModelCase{"resnet20", 16, 3, false, 2, 2e-4, 2e-3},
                                           ModelCase{"gpt-tiny", 4, 3, true, 1, 2e-4, 1e-2},
                                           ModelCase{"gpt-tiny", 4, 3, true, 2, 2e-4, 1e-2}),
                         [](const auto& tp) { return case_name(tp.param); });

TEST(GpuModel, RejectsAnotherLayout) {
  DLTUNE_GPU_OR_SKIP(ctx);
  auto cpu = Model::build(graph_named("mlp"), "mlp");
  auto gpu = GpuModel::build(graph_named("lenet"), "lenet", *ctx);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  auto st = (*gpu)->copy_params_from(*cpu);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kInvalidInput);
}

// The offloaded optimizer state (engine/gpu/offload.h) streams through 64-float chunks, with a
// last chunk of 40, over 3 AdamW steps: the parameters and both moments come out bit for bit as
// the same kernel gives on the whole device-resident vectors.
TEST(OffloadedState, ChunkedUpdatesMatchTheWholeVectorBitForBit) {
  DLTUNE_GPU_OR_SKIP(ctx);
  const int64_t n = 1000;
  Rng rng(11);
  std::vector<float> w(n), m0(n), v0(n);
  for (int64_t i = 0; i < n; ++i) {
    w[i] = static_cast<float>(rng.normal());
    m0[i] = 0.1f * static_cast<float>(rng.normal());
    v0[i] = 0.01f * static_cast<float>(rng.uniform());
  }
  auto off = OffloadedState::create(*ctx, 2, n, 64);
  ASSERT_TRUE(off.ok()) << off.error().message();
  EXPECT_EQ((*off)->chunks(), 16);
  EXPECT_EQ((*off)->device_bytes(), 2 * 2 * 64 * 4);
  std::copy(m0.begin(), m0.end(), (*off)->host(0));
  std::copy(v0.begin(), v0.end(), (*off)->host(1));
  DeviceBuffer wa = testing::upload(*ctx, w), wb = testing::upload(*ctx, w);
  DeviceBuffer ma = testing::upload(*ctx, m0), va = testing::upload(*ctx, v0);
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> g(n);
    for (float& x : g) x = static_cast<float>(rng.normal());
    DeviceBuffer grad = testing::upload(*ctx, g);
    adamw_step(*ctx, wa.floats(), grad.floats(), ma.floats(), va.floats(), n, 1e-2f, 0.9f, 0.999f,
               1e-8f, 0.01f, step);
    (*off)->update([&](int64_t begin, int64_t count, float* const* state) {
      adamw_step(*ctx, wb.floats() + begin, grad.floats() + begin, state[0], state[1], count, 1e-2f,
                 0.9f, 0.999f, 1e-8f, 0.01f, step);
    });
    ASSERT_TRUE(ctx->synchronize().ok());
  }
  EXPECT_EQ(testing::download(*ctx, wb.floats(), n), testing::download(*ctx, wa.floats(), n));
  EXPECT_EQ(std::vector<float>((*off)->host(0), (*off)->host(0) + n),
            testing::download(*ctx, ma.floats(), n));
  EXPECT_EQ(std::vector<float>((*off)->host(1), (*off)->host(1) + n),
            testing::download(*ctx, va.floats(), n));
  EXPECT_FALSE(OffloadedState::create(*ctx, 0, n).ok());
  EXPECT_FALSE(OffloadedState::create(*ctx, 1, 0).ok());
}

// Evaluation uses the running statistics the training steps left, on both sides.
TEST(GpuModel, EvaluatesWithRunningStatistics) {
  DLTUNE_GPU_OR_SKIP(ctx);
  const recipes::Graph graph = graph_named("resnet20");
  auto cpu = Model::build(graph, "resnet20");
  auto gpu = GpuModel::build(graph, "resnet20", *ctx);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  cpu->init_params(4);
  const int B = 8;
  cpu->reserve(B);
  ASSERT_TRUE((*gpu)->reserve(B).ok());
  Rng rng(6);
  std::vector<float> x(static_cast<size_t>(B * cpu->input_numel()));
  for (auto& v : x) v = rng.normal();
  cpu->forward(x.data(), B, true);  // moves the running statistics away from their init
  ASSERT_TRUE((*gpu)->copy_params_from(*cpu).ok());
  DeviceBuffer d_x = testing::upload(*ctx, x);
  const float* y = cpu->forward(x.data(), B, false);
  auto gy = (*gpu)->forward(d_x.floats(), B, false);
  ASSERT_TRUE(gy.ok()) << gy.error().message();
  auto out = testing::download(*ctx, *gy, static_cast<size_t>(B * cpu->output_numel()));
  EXPECT_LT(testing::rel_error(out, std::vector<float>(y, y + B * cpu->output_numel())), 1e-4);
}

}  // namespace
}  // namespace dltune::engine::gpu
