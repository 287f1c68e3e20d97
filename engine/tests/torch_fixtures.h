// Reading the PyTorch fixtures gen_torch_refs.py writes (engine/tests/data/), for the tests that
// check the engine against them (torch_ref_test.cc, bf16_test.cc), and choosing the kernels they
// run (nodes_offering, also kernel_select_test.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "engine/graph/model.h"
#include "engine/io/safetensors.h"
#include "engine/ops/loss.h"

namespace dltune::engine::test {

// Every node of m (built from g) that can run `kernel` on this CPU and build, set to it.
inline KernelChoices nodes_offering(const Model& m, const recipes::Graph& g,
                                    const std::string& kernel) {
  KernelChoices c;
  for (int i = 0; i < m.num_nodes(); ++i) {
    const auto k = m.kernel_candidates(i);
    if (std::find(k.begin(), k.end(), kernel) != k.end())
      c[g.nodes[static_cast<size_t>(i)].name] = kernel;
  }
  return c;
}

inline std::string data_dir() {
  const char* src = std::getenv("DLTUNE_SOURCE_DIR");
  return std::string(src ? src : DLTUNE_ENGINE_SOURCE_DIR) + "/engine/tests/data";
}

// gen_torch_refs.py's start_weights(), by tensor name: element i of tensor NAME holds
// scale * sin(0.37 i + 0.61 k) + offset, k = the sum of NAME's bytes mod 101.
inline void start_weights(Model& m) {
  auto fill = [](const recipes::TensorInfo& t, float* v) {
    int k = 0;
    for (unsigned char ch : t.name) k += ch;
    k %= 101;
    const int64_t n = recipes::numel(t.shape);
    const double scale =
        t.shape.size() >= 2 ? 1.0 / std::sqrt(static_cast<double>(n / t.shape[0])) : 0.1;
    const bool unit =
        (t.name.ends_with(".weight") && t.shape.size() == 1) || t.name.ends_with("running_var");
    for (int64_t i = 0; i < n; ++i)
      v[i] = static_cast<float>(scale * std::sin(0.37 * static_cast<double>(i) + 0.61 * k) +
                                (unit ? 1.0 : 0.0));
  };
  for (const auto& t : m.info().params) fill(t, m.params() + t.offset);
  for (const auto& t : m.info().state)
    if (!t.def.integer) fill(t, m.state() + t.offset);
}

// A safetensors fixture: its tensors and its metadata.
struct Step {
  TensorFile file;
  std::map<std::string, std::string> meta;
};

inline Step load_step(const std::string& name) {
  const std::string path = data_dir() + "/" + name;
  auto bytes = paths::read_file(path);
  EXPECT_TRUE(bytes.ok()) << path;
  Step s;
  if (!bytes.ok()) return s;
  auto f = parse_safetensors(*bytes, path);
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message());
  if (!f.ok()) return s;
  s.file = std::move(*f);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>((*bytes)[i]);
  nlohmann::json header = nlohmann::json::parse(bytes->substr(8, n));
  for (const auto& [k, v] : header["__metadata__"].items()) s.meta[k] = v.get<std::string>();
  return s;
}

// One training step's forward and backward of `m` (its weights set by the caller) on the
// fixture's batch, with PyTorch's mean cross-entropy; returns that loss. The gradients are in
// m.grads().
inline double forward_backward(Model& m, const Step& s) {
  const auto& x = s.file.at("input").values;
  const auto& labels_f = s.file.at("labels").values;
  std::vector<int32_t> labels(labels_f.begin(), labels_f.end());
  const int B = static_cast<int>(s.file.at("input").shape[0]);
  const int K = static_cast<int>(m.output_shape().back());
  const int rows = static_cast<int>(labels.size());
  m.reserve(B);
  const float* logits = m.forward(x.data(), B, true, 0);
  std::vector<float> dlogits(static_cast<size_t>(rows) * K);
  const double loss = softmax_cross_entropy(logits, labels.data(), rows, K,
                                            static_cast<float>(rows), dlogits.data()) /
                      rows;
  m.backward(x.data(), dlogits.data(), B);
  return loss;
}

}  // namespace dltune::engine::test
