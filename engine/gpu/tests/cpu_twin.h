// The CPU op a GPU twin is compared with, set up with random parameters and state: shared by
// gpu_math_test (host replays of the GPU kernels' math) and gpu_layers_test (the GPU ops).
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/rng.h"
#include "engine/ops/op.h"

namespace dltune::engine::gpu::testing {

// Pointers to consecutive tensors of `sizes` floats from `base`.
inline std::vector<float*> split(float* base, const std::vector<int64_t>& sizes) {
  std::vector<float*> out;
  for (int64_t n : sizes) {
    out.push_back(base);
    base += n;
  }
  return out;
}

inline std::vector<float> normal_vector(size_t n, Rng& rng, float scale = 1.0f) {
  std::vector<float> v(n);
  for (auto& x : v) x = scale * rng.normal();
  return v;
}

// A node of `op` with the attributes a test sets afterwards.
inline recipes::Node test_node(recipes::OpKind op) { return recipes::Node{"op", op, {}, {}}; }

struct CpuTwin {
  recipes::Node node;
  std::vector<recipes::Shape> in;
  recipes::Shape out;
  std::unique_ptr<Op> op;
  std::vector<int64_t> sizes, state_sizes;  // per parameter / state tensor
  std::vector<float> params, grads, state, workspace;

  int64_t in_numel(size_t k = 0) const { return recipes::numel(in[k]); }
  int64_t out_numel() const { return recipes::numel(out); }
  // Binds the parameters, gradients (added to when accumulate) and state, reserves `batch`.
  void bind(bool accumulate, int batch) {
    op->bind(split(params.data(), sizes), split(grads.data(), sizes),
             std::vector<bool>(sizes.size(), accumulate), split(state.data(), state_sizes));
    op->reserve(batch);
    workspace.assign(static_cast<size_t>(std::max<int64_t>(1, op->workspace_floats(batch))), 0.0f);
  }
};

// The CPU op of `node` on inputs `in`, with parameters 0.3 N(0, 1) (batch norm: weights near
// 1), random running statistics (variance in [0.5, 1.5)) and zero gradients, bound for `batch`.
inline CpuTwin cpu_twin(const recipes::Node& node, const std::vector<recipes::Shape>& in, int batch,
                        Rng& rng, bool accumulate = false) {
  CpuTwin t;
  t.node = node;
  t.in = in;
  const auto shape = recipes::infer_shape(node.op, node.attrs, in);
  EXPECT_EQ(shape.problem, "");
  t.out = shape.out;
  t.op = make_cpu_op(node.op);
  auto st = t.op->setup(node, in, t.out);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message());
  for (const auto& d : recipes::op_params(node.op, node.attrs, in)) {
    const int64_t n = recipes::numel(d.shape);
    if (d.trainable) {
      t.sizes.push_back(n);
      for (int64_t i = 0; i < n; ++i)
        t.params.push_back(d.init == recipes::Init::kOnes ? 1.0f + 0.2f * rng.normal()
                                                          : 0.3f * rng.normal());
    } else {
      t.state_sizes.push_back(n);
      for (int64_t i = 0; i < n; ++i)
        t.state.push_back(d.integer                        ? 0.0f
                          : d.init == recipes::Init::kOnes ? rng.uniform(0.5f, 1.5f)
                                                           : 0.2f * rng.normal());
    }
  }
  // A tied linear lists no weight of its own: the test supplies the tied tensor as its first.
  if (node.op == recipes::OpKind::kLinear && !node.attrs.tie.empty()) {
    const int64_t f = node.attrs.flatten ? recipes::numel(in[0]) : in[0].back();
    const int64_t n = node.attrs.out * f;
    t.sizes.insert(t.sizes.begin(), n);
    std::vector<float> w = normal_vector(static_cast<size_t>(n), rng, 0.3f);
    t.params.insert(t.params.begin(), w.begin(), w.end());
  }
  t.grads.assign(t.params.size(), 0.0f);
  t.bind(accumulate, batch);
  return t;
}

}  // namespace dltune::engine::gpu::testing
