// training.precision bf16 (engine/core/precision.h) against PyTorch 1.13's CPU autocast, from the
// fixtures gen_torch_refs.py wrote:
//   - one step of resnet20 and of a small GPT from the same weights: every parameter's gradient
//     within the stated bound of PyTorch's fp32 gradient (relative L2 error per tensor at most
//     2x PyTorch's own autocast error + kGradSlack), and the loss alike;
//   - loss curves over 300 (LeNet-5, SGD) and 150 (GPT, AdamW) steps: every 20-step window's mean
//     loss within kCurveSlack + 5 % of PyTorch's autocast curve, plus 3x PyTorch's own
//     fp32-to-bf16 gap in that window;
// and the bf16 rounding itself, the fp32 master weights a checkpoint keeps, and the parsing of
// DLTUNE_CPU_MASK. bf16_masked_test runs this program again with DLTUNE_CPU_MASK=bf16,amx: a CPU
// without bf16 instructions, where everything above must hold through the fallback.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/core/cpu_features.h"
#include "engine/core/precision.h"
#include "engine/ops/loss.h"
#include "engine/ops/onednn.h"
#include "engine/optim/optimizer.h"
#include "engine/tests/torch_fixtures.h"
#include "recipes/model/builtins.h"

namespace dltune::engine {
namespace {

using nlohmann::json;

constexpr double kGradSlack = 0.01;   // relative L2, per tensor
constexpr double kCurveSlack = 0.03;  // nats, per 20-step window mean

TEST(Bf16, RoundingIsToNearestEven) {
  EXPECT_EQ(bf16_round(1.0f), 1.0f);
  EXPECT_EQ(bf16_round(1.0f + 1.0f / 512), 1.0f);               // below half an ulp (2^-7)
  EXPECT_EQ(bf16_round(1.0f + 3.0f / 512), 1.0f + 1.0f / 128);  // above half: up
  EXPECT_EQ(bf16_round(1.0f + 1.0f / 256), 1.0f);               // a tie: to the even 1.0
  EXPECT_EQ(bf16_round(1.0f + 3.0f / 256), 1.0f + 2.0f / 128);  // a tie: to the even 1 + 2^-6
  EXPECT_EQ(bf16_round(-3.0e38f), -bf16_round(3.0e38f));
  EXPECT_TRUE(std::isnan(bf16_round(std::nanf(""))));
  EXPECT_TRUE(std::isinf(bf16_round(INFINITY)));
  std::vector<float> v(1000), r(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i)) * 1e3f;
  bf16_round_array(v.data(), r.data(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(r[i], bf16_round(v[i])) << i;
    uint32_t u;
    std::memcpy(&u, &r[i], 4);
    ASSERT_EQ(u & 0xFFFFu, 0u);
    ASSERT_LE(std::abs(r[i] - v[i]), std::abs(v[i]) / 256.0f);
  }
}

// ||a - b|| / ||b||
double rel_l2(const float* a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    den += double{b[i]} * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// The engine's gradients of the fixture's step in `p`, with the loss.
double engine_grads(Model& m, const test::Step& s, Precision p) {
  m.set_precision(p);
  test::start_weights(m);
  return test::forward_backward(m, s);
}

void check_bf16_step(Model& m, const test::Step& s) {
  const double loss32 = std::stod(s.meta.at("loss32")), loss16 = std::stod(s.meta.at("loss16"));
  const double loss = engine_grads(m, s, Precision::kBf16);
  EXPECT_LE(std::abs(loss - loss32), 2 * std::abs(loss16 - loss32) + 1e-3)
      << "engine bf16 loss " << loss << ", torch fp32 " << loss32 << ", torch bf16 " << loss16;
  std::vector<float> g16(m.grads(), m.grads() + m.num_params());
  engine_grads(m, s, Precision::kFp32);
  int checked = 0, moved = 0;
  double worst = 0.0, worst_torch = 0.0;
  std::string worst_name;
  for (const auto& t : m.info().params) {
    SCOPED_TRACE(t.name);
    if (!s.file.count("grad32." + t.name)) continue;  // a tied tensor under its other name
    const auto& ref32 = s.file.at("grad32." + t.name).values;
    const auto& ref16 = s.file.at("grad16." + t.name).values;
    const float* got = g16.data() + t.offset;
    const double err = rel_l2(got, ref32);
    const double torch_err = rel_l2(ref16.data(), ref32);
    EXPECT_LE(err, 2 * torch_err + kGradSlack)
        << "engine bf16 against torch fp32 " << err << ", torch's own autocast " << torch_err;
    // The engine's fp32 gradient is the fp32 reference's (torch_ref_test checks it closely);
    // its bf16 one must differ from it: the rounding happened.
    if (rel_l2(got, std::vector<float>(m.grads() + t.offset, m.grads() + t.offset + ref32.size())) >
        1e-6)
      ++moved;
    if (err - 2 * torch_err > worst - 2 * worst_torch || worst_name.empty())
      worst = err, worst_torch = torch_err, worst_name = t.name;
    ++checked;
  }
  EXPECT_GE(checked, 10);
  EXPECT_GE(moved, checked / 2) << "bf16 changed too few gradients: is it computing in fp32?";
  std::printf(
      "%s: closest to the bound: %s, relative L2 error against fp32 %.4f (PyTorch's "
      "autocast: %.4f)\n",
      s.meta.at("model").c_str(), worst_name.c_str(), worst, worst_torch);
}

TEST(Bf16, OneStepGradientsOfResnet20AgainstFp32) {
  test::Step s = test::load_step("bf16_step_resnet20.safetensors");
  auto g = recipes::builtin_graph("resnet20", {});
  ASSERT_TRUE(g.has_value());
  auto m = Model::build(*g, "resnet20");
  ASSERT_TRUE(m) << m.error().message();
  check_bf16_step(*m, s);
}

TEST(Bf16, OneStepGradientsOfGptTinyAgainstFp32) {
  test::Step s = test::load_step("bf16_step_gpt_tiny.safetensors");
  recipes::BuiltinOptions o;
  o.blocks = std::stoi(s.meta.at("blocks"));
  o.width = std::stoi(s.meta.at("width"));
  o.heads = std::stoi(s.meta.at("heads"));
  o.context = std::stoi(s.meta.at("context"));
  o.vocab = std::stoi(s.meta.at("vocab"));
  auto g = recipes::builtin_graph("gpt-tiny", o);
  ASSERT_TRUE(g.has_value());
  g->input_kind = recipes::InputKind::kTokens;
  auto m = Model::build(*g, "gpt-tiny");
  ASSERT_TRUE(m) << m.error().message();
  check_bf16_step(*m, s);
}

json load_curves() {
  auto text = paths::read_file(test::data_dir() + "/bf16_curves.json");
  EXPECT_TRUE(text.ok());
  return text.ok() ? json::parse(*text) : json();
}

// gen_torch_refs.py's lenet_image / lenet_label / curve_token.
int lenet_label(int n) { return (n * 7) % 10; }
void lenet_image(int n, float* out) {
  const int y = lenet_label(n);
  for (int i = 0; i < 28; ++i)
    for (int j = 0; j < 28; ++j)
      out[i * 28 + j] = static_cast<float>(std::sin(0.9 * (y + 1) * i / 28.0 * M_PI + 0.37 * n) *
                                               std::cos((y % 4 + 1) * j / 28.0 * M_PI) +
                                           0.3 * std::sin(0.11 * (i * 28 + j) + 0.5 * n));
}
int curve_token(int64_t k) { return 97 + static_cast<int>((k * 7 + k / 13) % 26); }

// Each 20-step window's mean of `got` against `ref16` (torch autocast) and `ref32`.
void check_curve(const std::vector<double>& got, const json& ref, const char* what) {
  const auto r16 = ref["bf16"].get<std::vector<double>>();
  const auto r32 = ref["fp32"].get<std::vector<double>>();
  ASSERT_EQ(got.size(), r16.size());
  constexpr size_t kWindow = 20;
  double worst = 0.0;
  for (size_t w = 0; w + kWindow <= got.size(); w += kWindow) {
    double e = 0, t16 = 0, t32 = 0;
    for (size_t i = w; i < w + kWindow; ++i) e += got[i], t16 += r16[i], t32 += r32[i];
    e /= kWindow, t16 /= kWindow, t32 /= kWindow;
    const double bound = kCurveSlack + 0.05 * t16 + 3 * std::abs(t32 - t16);
    EXPECT_LE(std::abs(e - t16), bound)
        << what << " steps " << w << ".." << w + kWindow << ": engine bf16 " << e << ", torch bf16 "
        << t16 << ", torch fp32 " << t32;
    worst = std::max(worst, std::abs(e - t16));
  }
  std::printf("%s: largest window difference from torch's bf16 curve: %.4f nats\n", what, worst);
}

TEST(Bf16, LenetLossCurveFollowsAutocast) {
  const json curves = load_curves();
  const json& c = curves.at("lenet5");
  const int N = c["samples"].get<int>(), B = c["batch"].get<int>(), S = c["steps"].get<int>();
  auto g = recipes::builtin_graph("lenet5", {});
  ASSERT_TRUE(g.has_value());
  auto m = Model::build(*g, "lenet5");
  ASSERT_TRUE(m) << m.error().message();
  m->set_precision(Precision::kBf16);
  test::start_weights(*m);
  m->reserve(B);
  Sgd sgd(m->num_params(), 0.9f, 5e-4f);
  std::vector<float> images(static_cast<size_t>(N) * 784), x(static_cast<size_t>(B) * 784);
  for (int n = 0; n < N; ++n) lenet_image(n, images.data() + int64_t{n} * 784);
  std::vector<int32_t> y(static_cast<size_t>(B));
  std::vector<float> dlogits(static_cast<size_t>(B) * 10);
  std::vector<double> losses;
  for (int s = 0; s < S; ++s) {
    for (int b = 0; b < B; ++b) {
      const int n = (s * B + b) % N;
      std::memcpy(x.data() + int64_t{b} * 784, images.data() + int64_t{n} * 784, 784 * 4);
      y[static_cast<size_t>(b)] = lenet_label(n);
    }
    const float* logits = m->forward(x.data(), B, true, 0);
    losses.push_back(
        softmax_cross_entropy(logits, y.data(), B, 10, static_cast<float>(B), dlogits.data()) / B);
    m->backward(x.data(), dlogits.data(), B);
    sgd.step(m->params(), m->grads(), 0.005f);
  }
  check_curve(losses, c, "lenet5");
}

TEST(Bf16, GptLossCurveFollowsAutocast) {
  const json curves = load_curves();
  const json& c = curves.at("gpt");
  const int N = c["samples"].get<int>(), B = c["batch"].get<int>(), S = c["steps"].get<int>();
  const int T = c["context"].get<int>();
  recipes::BuiltinOptions o;
  o.blocks = c["blocks"].get<int>();
  o.width = c["width"].get<int>();
  o.heads = c["heads"].get<int>();
  o.context = T;
  o.vocab = 256;
  auto g = recipes::builtin_graph("gpt-tiny", o);
  ASSERT_TRUE(g.has_value());
  g->input_kind = recipes::InputKind::kTokens;
  auto m = Model::build(*g, "gpt");
  ASSERT_TRUE(m) << m.error().message();
  m->set_precision(Precision::kBf16);
  test::start_weights(*m);
  m->reserve(B);
  AdamW adamw(m->num_params(), 0.9f, 0.95f, 1e-6f, 0.1f);
  std::vector<float> x(static_cast<size_t>(B) * T), dlogits(static_cast<size_t>(B) * T * 256);
  std::vector<int32_t> y(static_cast<size_t>(B) * T);
  std::vector<double> losses;
  for (int s = 0; s < S; ++s) {
    for (int b = 0; b < B; ++b) {
      const int64_t start = int64_t{(s * B + b) % N} * 5;
      for (int t = 0; t < T; ++t) {
        x[static_cast<size_t>(b * T + t)] = static_cast<float>(curve_token(start + t));
        y[static_cast<size_t>(b * T + t)] = curve_token(start + t + 1);
      }
    }
    const float* logits = m->forward(x.data(), B, true, 0);
    const int rows = B * T;
    losses.push_back(softmax_cross_entropy(logits, y.data(), rows, 256, static_cast<float>(rows),
                                           dlogits.data()) /
                     rows);
    m->backward(x.data(), dlogits.data(), B);
    clip_grad_norm(m->grads(), m->num_params(), 1.0);
    adamw.step(m->params(), m->grads(), 1e-3f);
  }
  check_curve(losses, c, "gpt");
}

TEST(Bf16, MasterWeightsStayFp32) {
  // After bf16 steps the parameters are not bf16 values: the optimizer updates fp32 masters
  // (which a checkpoint saves: Model::params()).
  auto g = recipes::builtin_graph("lenet5", {});
  ASSERT_TRUE(g.has_value());
  auto m = Model::build(*g, "lenet5");
  ASSERT_TRUE(m);
  m->set_precision(Precision::kBf16);
  m->init_params(1);
  m->reserve(8);
  std::vector<float> x(8 * 784);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * static_cast<float>(i));
  std::vector<int32_t> y = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<float> d(80);
  Sgd sgd(m->num_params(), 0.9f, 0.0f);
  for (int s = 0; s < 3; ++s) {
    const float* logits = m->forward(x.data(), 8, true, 0);
    softmax_cross_entropy(logits, y.data(), 8, 10, 8.0f, d.data());
    m->backward(x.data(), d.data(), 8);
    sgd.step(m->params(), m->grads(), 0.01f);
  }
  int64_t not_bf16 = 0;
  for (int64_t i = 0; i < m->num_params(); ++i)
    not_bf16 += bf16_round(m->params()[i]) != m->params()[i] ? 1 : 0;
  EXPECT_GT(not_bf16, m->num_params() / 2);
}

TEST(CpuMask, ParsesNamesAndRefusesUnknownOnes) {
  CpuFeatures f;
  f.avx2 = f.fma = f.avx512 = f.avx512_bf16 = f.amx_bf16 = true;
  CpuFeatures a = f;
  EXPECT_EQ(apply_cpu_mask("bf16,amx", &a), "");
  EXPECT_FALSE(a.avx512_bf16 || a.amx_bf16);
  EXPECT_TRUE(a.avx512);
  EXPECT_FALSE(a.bf16_hardware());
  EXPECT_EQ(a.masked, "bf16,amx");
  CpuFeatures b = f;
  EXPECT_EQ(apply_cpu_mask(" avx512 ", &b), "");
  EXPECT_FALSE(b.avx512 || b.avx512_bf16 || b.amx_bf16);
  EXPECT_TRUE(b.avx2);
  CpuFeatures c = f;
  const std::string err = apply_cpu_mask("bf16,sse9", &c);
  EXPECT_NE(err.find("unknown feature 'sse9'"), std::string::npos) << err;
  EXPECT_TRUE(c.avx512_bf16) << "a mask with an error is ignored whole";
}

// Under DLTUNE_CPU_MASK=bf16,amx (bf16_masked_test): the engine sees no bf16 instructions, offers
// no oneDNN bf16 convolution, and trains bf16 through the fallback (the tests above). (Linear's
// "onednn" kernel is oneDNN's fp32 matmul on the rounded operands, so it stays on offer.)
TEST(CpuMask, MaskedCpuHasNoBf16Kernels) {
  if (cpu_features().masked.find("bf16") == std::string::npos)
    GTEST_SKIP() << "runs under DLTUNE_CPU_MASK=bf16,amx (ctest bf16_masked_test)";
  EXPECT_FALSE(cpu_features().bf16_hardware());
  const OnednnConvShape s{16, 8, 8, 16, 8, 8, 3, 1, 1, 1, false};
  EXPECT_FALSE(onednn_conv_supported(s, Precision::kBf16));
  auto g = recipes::builtin_graph("resnet20", {});
  auto m = Model::build(*g, "resnet20");
  ASSERT_TRUE(m);
  m->set_precision(Precision::kBf16);
  int convs = 0;
  for (int i = 0; i < m->num_nodes(); ++i) {
    if (g->nodes[static_cast<size_t>(i)].op != recipes::OpKind::kConv2d) continue;
    ++convs;
    for (const std::string& k : m->kernel_candidates(i)) EXPECT_NE(k, "onednn") << i;
  }
  EXPECT_EQ(convs, 19);
}

}  // namespace
}  // namespace dltune::engine
