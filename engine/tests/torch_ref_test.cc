// Forward and backward of every layer kind against PyTorch 1.13 (float64 reference rounded to
// float32), from data/torch_refs.json written by gen_torch_refs.py.
#include <cmath>
#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "engine/layer.h"
#include "engine/loss.h"

namespace dltune::engine {
namespace {

using nlohmann::json;

json load_refs() {
  const char* src = std::getenv("DLTUNE_SOURCE_DIR");
  std::string root = src ? src : DLTUNE_ENGINE_SOURCE_DIR;
  auto text = paths::read_file(root + "/engine/tests/data/torch_refs.json");
  EXPECT_TRUE(text.ok()) << (text.ok() ? "" : text.error().message());
  return text.ok() ? json::parse(*text) : json();
}

LayerSpec spec_of(const json& s) {
  auto kind = parse_layer_kind(s.at("kind").get<std::string>());
  EXPECT_TRUE(kind.ok());
  LayerSpec spec;
  spec.kind = *kind;
  spec.out = s.value("out", 0);
  spec.kernel = s.value("kernel", 1);
  spec.stride = s.value("stride", 1);
  spec.pad = s.value("pad", 0);
  spec.groups = s.value("groups", 1);
  spec.lrn_size = s.value("size", 5);
  spec.alpha = s.value("alpha", 1e-4f);
  spec.beta = s.value("beta", 0.75f);
  spec.k = s.value("k", 1.0f);
  return spec;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_err = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double{got[i]} - want[i]) / (1.0 + std::abs(double{want[i]}));
    max_err = std::max(max_err, err);
    ASSERT_LT(err, 1e-5) << what << "[" << i << "]: engine " << got[i] << " torch " << want[i];
  }
}

TEST(TorchRef, EveryLayerForwardAndBackward) {
  json refs = load_refs();
  ASSERT_TRUE(refs.contains("layers"));
  int checked = 0;
  for (const auto& c : refs["layers"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto layer = make_layer(spec_of(c["spec"]));
    auto d = c["in_dims"];
    auto out = layer->setup(Dims{d[0].get<int>(), d[1].get<int>(), d[2].get<int>()});
    ASSERT_TRUE(out.ok()) << out.error().message();
    const int B = c["batch"].get<int>();
    auto params = c["params"].get<std::vector<float>>();
    ASSERT_EQ(static_cast<int64_t>(params.size()), layer->num_params());
    std::vector<float> grads(params.size());
    layer->bind(params.data(), grads.data());
    layer->reserve(B);
    std::vector<float> ws(std::max<int64_t>(1, layer->workspace_floats(B)));
    auto x = c["x"].get<std::vector<float>>();
    const float scale = c.value("input_scale", 1.0f);
    for (auto& v : x) v *= scale;
    std::vector<float> y(B * out->size()), dx(x.size());
    LayerContext ctx{ws.data(), true, 0};
    layer->forward(ctx, x.data(), y.data(), B);
    auto dout = c["dout"].get<std::vector<float>>();
    layer->backward(ctx, x.data(), y.data(), dout.data(), dx.data(), B);
    for (auto& v : y) v /= scale;
    expect_close(y, c["y"].get<std::vector<float>>(), "forward");
    expect_close(dx, c["dx"].get<std::vector<float>>(), "input gradient");
    expect_close(grads, c["dparams"].get<std::vector<float>>(), "parameter gradient");
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST(TorchRef, SoftmaxCrossEntropy) {
  json refs = load_refs();
  const auto& c = refs.at("softmax_cross_entropy");
  auto z = c["logits"].get<std::vector<float>>();
  auto labels = c["labels"].get<std::vector<int32_t>>();
  const int B = static_cast<int>(labels.size()), K = static_cast<int>(z.size()) / B;
  std::vector<float> dz(z.size());
  double loss = softmax_cross_entropy(z.data(), labels.data(), B, K, B, dz.data()) / B;
  EXPECT_NEAR(loss, c["loss"].get<double>(), 1e-5);
  expect_close(dz, c["dlogits"].get<std::vector<float>>(), "dlogits");
}

}  // namespace
}  // namespace dltune::engine
