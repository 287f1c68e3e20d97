// The engine against PyTorch 1.13, from the fixtures gen_torch_refs.py wrote:
// - every op's forward, input gradient, parameter gradients and batch-norm statistics, as small
//   graphs run through the executor, within 1e-5 relative (float64 reference rounded to f32);
// - one whole training step of resnet20 (SGD with momentum and weight decay, batch norm in
//   training mode) and of gpt-tiny (AdamW, gradient clipping, tied embeddings) from the same
//   weights: the loss and every parameter after the step within 1e-4 relative.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "engine/core/thread_pool.h"
#include "engine/graph/model.h"
#include "engine/io/safetensors.h"
#include "engine/ops/loss.h"
#include "engine/optim/optimizer.h"
#include "engine/tests/torch_fixtures.h"
#include "recipes/model/builtins.h"

namespace dltune::engine {
namespace {

using nlohmann::json;

using test::data_dir;

json load_refs() {
  auto text = paths::read_file(data_dir() + "/torch_refs.json");
  EXPECT_TRUE(text.ok()) << (text.ok() ? "" : text.error().message());
  return text.ok() ? json::parse(*text) : json();
}

// Largest |got - want| / (1 + |want|) (or / max |want| with `by_max`).
void expect_close(const float* got, const std::vector<float>& want, double tol,
                  const std::string& what, bool by_max = false) {
  double scale = 0.0;
  for (float w : want) scale = std::max(scale, std::abs(double{w}));
  for (size_t i = 0; i < want.size(); ++i) {
    const double denom = by_max ? std::max(scale, 1e-30) : 1.0 + std::abs(double{want[i]});
    const double err = std::abs(double{got[i]} - want[i]) / denom;
    ASSERT_LT(err, tol) << what << "[" << i << "]: engine " << got[i] << " torch " << want[i];
  }
}

// One fixture case through the executor with the given kernel choices (and threads).
void check_case(const json& c, const KernelChoices& kernels, int threads) {
  auto graph = recipes::graph_from_json(c["graph"]);
  ASSERT_TRUE(graph) << graph.error().message();
  auto m = Model::build(*graph, c["name"].get<std::string>());
  ASSERT_TRUE(m) << m.error().message();
  ThreadPool pool(threads);
  m->set_thread_pool(&pool);
  ASSERT_TRUE(m->set_kernels(kernels).ok());
  for (const auto& [name, values] : c["params"].items()) {
    int64_t n = 0;
    float* dst = m->find_tensor(name, &n);
    ASSERT_NE(dst, nullptr) << name;
    auto v = values.get<std::vector<float>>();
    ASSERT_EQ(static_cast<int64_t>(v.size()), n) << name;
    std::copy(v.begin(), v.end(), dst);
  }
  for (const auto& [name, values] : c["state_before"].items()) {
    float* dst = m->find_tensor(name);
    ASSERT_NE(dst, nullptr) << name;
    auto v = values.get<std::vector<float>>();
    std::copy(v.begin(), v.end(), dst);
  }
  const int B = c["batch"].get<int>();
  m->reserve(B);
  auto x = c["x"].get<std::vector<float>>();
  const float* y = m->forward(x.data(), B, c["train"].get<bool>());
  expect_close(y, c["y"].get<std::vector<float>>(), 1e-5, "forward");
  for (const auto& [name, values] : c["state_after"].items())
    expect_close(m->find_tensor(name), values.get<std::vector<float>>(), 1e-5, name);
  auto dout = c["dout"].get<std::vector<float>>();
  std::vector<float> dx(x.size());
  m->backward(x.data(), dout.data(), B, {}, false, c.contains("dx") ? dx.data() : nullptr);
  if (c.contains("dx")) expect_close(dx.data(), c["dx"].get<std::vector<float>>(), 1e-5, "dx");
  for (const auto& [name, values] : c["grads"].items()) {
    const float* p = m->find_tensor(name);
    const float* g = m->grads() + (p - m->params());
    expect_close(g, values.get<std::vector<float>>(), 1e-5, "gradient of " + name);
  }
}

// Every op, with every kernel each node can run on this CPU (own ones, oneDNN's), on one and on
// three threads.
TEST(TorchRef, EveryOpForwardAndBackward) {
  json refs = load_refs();
  ASSERT_TRUE(refs.contains("ops"));
  int checked = 0, variants = 0;
  for (const auto& c : refs["ops"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto graph = recipes::graph_from_json(c["graph"]);
    ASSERT_TRUE(graph) << graph.error().message();
    auto probe = Model::build(*graph, "probe");
    ASSERT_TRUE(probe) << probe.error().message();
    std::vector<KernelChoices> choices = {{}};
    for (int i = 0; i < probe->num_nodes(); ++i)
      for (const std::string& k : probe->kernel_candidates(i))
        if (k != probe->kernel(i)) choices.push_back({{graph->nodes[size_t(i)].name, k}});
    for (const KernelChoices& k : choices) {
      SCOPED_TRACE(k.empty() ? "default kernels" : k.begin()->first + ": " + k.begin()->second);
      for (int threads : {1, 3}) check_case(c, k, threads);
      variants += k.empty() ? 0 : 1;
    }
    ++checked;
  }
  EXPECT_GE(checked, 30);
  EXPECT_GE(variants, 5) << "conv cases run their other kernels too";
}

TEST(TorchRef, SoftmaxCrossEntropy) {
  json refs = load_refs();
  for (const char* key : {"softmax_cross_entropy", "sequence_cross_entropy"}) {
    SCOPED_TRACE(key);
    const auto& c = refs.at(key);
    auto z = c["logits"].get<std::vector<float>>();
    auto labels = c["labels"].get<std::vector<int32_t>>();
    // Every position of every sequence is a row; the mean is over all of them.
    const int rows = static_cast<int>(labels.size()), K = static_cast<int>(z.size()) / rows;
    std::vector<float> dz(z.size());
    const double loss = softmax_cross_entropy(z.data(), labels.data(), rows, K,
                                              static_cast<float>(rows), dz.data()) /
                        rows;
    EXPECT_NEAR(loss, c["loss"].get<double>(), 1e-5);
    expect_close(dz.data(), c["dlogits"].get<std::vector<float>>(), 1e-5, "dlogits");
  }
}

using test::load_step;
using test::start_weights;
using test::Step;

// One step of `m` on the fixture's batch with `opt`; checks the loss and every tensor after it.
void check_step(Model& m, const Step& s, Optimizer& opt, float lr, double clip) {
  start_weights(m);
  const double loss = test::forward_backward(m, s);
  EXPECT_NEAR(loss, std::stod(s.meta.at("loss")), 1e-4 * std::abs(loss)) << "loss";
  if (clip > 0) clip_grad_norm(m.grads(), m.num_params(), clip);
  opt.step(m.params(), m.grads(), lr);
  int checked = 0;
  for (const auto& [name, t] : s.file) {
    if (!name.starts_with("after.")) continue;
    const std::string tensor = name.substr(6);
    if (tensor.ends_with("num_batches_tracked")) continue;
    SCOPED_TRACE(tensor);
    const float* got = m.find_tensor(tensor);
    ASSERT_NE(got, nullptr);
    // Relative to the tensor's largest value: a weight near zero moves by lr x its gradient.
    expect_close(got, t.values, 1e-4, tensor, true);
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(m.info().params.size() + m.info().state.size() -
                                      (m.info().state.size() / 3)));
}

// One SGD step of resnet20 against the fixture, `kernels` chosen (empty: the defaults).
void check_resnet20_step(Model& m, const KernelChoices& kernels) {
  Step s = load_step("step_resnet20.safetensors");
  ASSERT_TRUE(m.set_kernels(kernels).ok());
  Sgd sgd(m.num_params(), 0.9f, 5e-4f);
  check_step(m, s, sgd, 0.1f, 0.0);
}

TEST(TorchRef, OneTrainingStepOfResnet20) {
  auto g = recipes::builtin_graph("resnet20", {});
  ASSERT_TRUE(g.has_value());
  auto m = Model::build(*g, "resnet20");
  ASSERT_TRUE(m) << m.error().message();
  check_resnet20_step(*m, {});
}

// The same step with every layer the winograd kernel takes on it (16 of the 19 convolutions:
// not the RGB stem, not the two stride-2 ones).
TEST(TorchRef, OneTrainingStepOfResnet20OnWinograd) {
  auto g = recipes::builtin_graph("resnet20", {});
  ASSERT_TRUE(g.has_value());
  auto m = Model::build(*g, "resnet20");
  ASSERT_TRUE(m) << m.error().message();
  const KernelChoices winograd = test::nodes_offering(*m, *g, "winograd");
  if (winograd.empty()) GTEST_SKIP() << "this CPU runs no AVX2 + FMA: no winograd kernel";
  EXPECT_EQ(winograd.size(), 16u);
  check_resnet20_step(*m, winograd);
}

TEST(TorchRef, OneTrainingStepOfGptTiny) {
  Step s = load_step("step_gpt_tiny.safetensors");
  recipes::BuiltinOptions o;
  o.blocks = std::stoi(s.meta.at("blocks"));
  o.width = std::stoi(s.meta.at("width"));
  o.heads = std::stoi(s.meta.at("heads"));
  o.context = std::stoi(s.meta.at("context"));
  o.vocab = std::stoi(s.meta.at("vocab"));
  auto g = recipes::builtin_graph("gpt-tiny", o);
  ASSERT_TRUE(g.has_value());
  auto m = Model::build(*g, "gpt-tiny");
  ASSERT_TRUE(m) << m.error().message();
  AdamW adamw(m->num_params(), 0.9f, 0.95f, std::stof(s.meta.at("eps")), 0.1f);
  check_step(*m, s, adamw, 1e-3f, 1.0);
}

}  // namespace
}  // namespace dltune::engine
