// The memory model against what the executor allocates: for one batch in flight, the activation,
// workspace and op-state terms equal Model::activation_bytes() exactly, for chains, residual
// networks and transformers; parameters, gradients and optimizer state follow the layout.
#include "planning/memory_model.h"

#include <vector>

#include <gtest/gtest.h>

#include "engine/graph/batch_buffers.h"
#include "engine/graph/model.h"
#include "recipes/model/builtins.h"
#include "recipes/model/graph.h"

namespace dltune::engine {
namespace {

using planning::kOffloadChunkFloats;
using planning::MemoryQuery;
using planning::MemoryTerms;

// The memory model with this engine's executor.
Result<MemoryTerms> estimate_memory(const recipes::Graph& g, const MemoryQuery& q) {
  return planning::estimate_memory(g, q, batch_buffers);
}

TEST(MemoryModel, OneBatchInFlightIsWhatTheExecutorAllocates) {
  recipes::BuiltinOptions gpt;
  gpt.blocks = 2, gpt.width = 32, gpt.heads = 4, gpt.context = 16;
  struct Case {
    const char* name;
    recipes::BuiltinOptions o;
    int batch;
  };
  for (const Case& c : {Case{"lenet", {}, 64}, Case{"alexnet", {}, 4}, Case{"resnet20", {}, 32},
                        Case{"googlenet", {}, 2}, Case{"gpt-tiny", gpt, 8}}) {
    SCOPED_TRACE(c.name);
    auto g = recipes::builtin_graph(c.name, c.o);
    ASSERT_TRUE(g.has_value());
    auto m = Model::build(*g, c.name);
    ASSERT_TRUE(m.ok());
    m->reserve(c.batch);
    MemoryQuery q;
    q.microbatch = c.batch;
    auto est = estimate_memory(*g, q);
    ASSERT_TRUE(est.ok()) << est.error().message();
    EXPECT_EQ(est->activations + est->workspace, m->activation_bytes());
    EXPECT_EQ(est->parameters, 4 * m->num_params());
    EXPECT_EQ(est->gradients, est->parameters);
    EXPECT_EQ(est->optimizer, est->parameters);  // SGD's velocity
    EXPECT_EQ(est->state, 4 * m->num_state());
  }
}

TEST(MemoryModel, InFlightMicrobatchesAndRecomputation) {
  auto g = recipes::builtin_graph("resnet20", {});
  MemoryQuery one;
  one.microbatch = 16;
  MemoryQuery four = one;
  four.in_flight = 4;
  four.optimizer = "adamw";
  MemoryQuery recompute = four;
  recompute.recompute = true;
  const MemoryTerms a = *estimate_memory(*g, one), b = *estimate_memory(*g, four),
                    c = *estimate_memory(*g, recompute);
  EXPECT_EQ(b.activations, 4 * a.activations);
  EXPECT_EQ(b.optimizer, 2 * a.optimizer);
  // Recomputation keeps one set of activations (the inputs stay in the input buffer).
  EXPECT_EQ(c.activations, a.activations);
  EXPECT_LT(c.total(), b.total());
}

// A pipeline stage's micro-batches in flight: one model each, all on one set of weights and
// (share_scratch_of) one set of activation-gradient slots and workspace. What the models
// allocate together is what the memory model counts for that many in flight, and the models
// compute what one model computes.
TEST(MemoryModel, ModelsInFlightShareOneWorkspace) {
  recipes::BuiltinOptions o;
  o.blocks = 2, o.width = 32, o.heads = 4, o.context = 16;
  for (const char* name : {"resnet20", "gpt-tiny"}) {
    SCOPED_TRACE(name);
    auto g = recipes::builtin_graph(
        name, std::string(name) == "gpt-tiny" ? o : recipes::BuiltinOptions{});
    ASSERT_TRUE(g.has_value());
    const int batch = 4, in_flight = 3;
    auto owner = Model::build(*g, name);
    ASSERT_TRUE(owner.ok());
    owner->init_params(7);
    owner->reserve(batch);
    int64_t bytes = owner->activation_bytes();
    std::vector<Model> extra;
    for (int i = 1; i < in_flight; ++i) {
      auto m = Model::build(*g, name, &*owner);
      ASSERT_TRUE(m.ok());
      extra.push_back(std::move(*m));
    }
    for (Model& m : extra) {
      m.share_scratch_of(*owner);
      m.reserve(batch);
      bytes += m.activation_bytes();
    }
    MemoryQuery q;
    q.microbatch = batch;
    q.in_flight = in_flight;
    auto est = estimate_memory(*g, q);
    ASSERT_TRUE(est.ok()) << est.error().message();
    EXPECT_EQ(est->activations + est->workspace, bytes);
    // Forward on every model, then backward on each: the same output and input gradient as the
    // owner alone, although the backwards share the owner's scratch.
    const int64_t in = recipes::numel(g->input), out = owner->output_numel();
    std::vector<float> x(static_cast<size_t>(batch * in)), dy(static_cast<size_t>(batch * out));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = g->input_kind == recipes::InputKind::kTokens ? static_cast<float>(i % 7)
                                                          : 0.01f * static_cast<float>(i % 13);
    for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.001f * static_cast<float>(i % 11) - 0.005f;
    const float* y0 = owner->forward(x.data(), batch, true, 3);
    const std::vector<float> want_y(y0, y0 + batch * out);
    std::vector<std::vector<float>> ys;
    for (Model& m : extra) {
      const float* y = m.forward(x.data(), batch, true, 3, /*update_state=*/false);
      ys.emplace_back(y, y + batch * out);
    }
    for (const auto& y : ys) EXPECT_EQ(y, want_y);
    owner->backward(x.data(), dy.data(), batch);
    const std::vector<float> want_g(owner->grads(), owner->grads() + owner->num_params());
    for (Model& m : extra) {
      m.backward(x.data(), dy.data(), batch);  // writes the shared gradients again
      EXPECT_EQ(std::vector<float>(owner->grads(), owner->grads() + owner->num_params()), want_g);
    }
  }
}

// Offloaded (GPU), the optimizer state leaves the device total for host memory, and the device
// keeps the staging buffers of engine/gpu/offload.h: two chunks per vector for a model larger
// than a chunk (VGG-16's 138 M parameters), one vector's worth for a smaller one (resnet20).
TEST(MemoryModel, OffloadMovesTheOptimizerStateToTheHost) {
  for (const char* name : {"vgg16", "resnet20"}) {
    SCOPED_TRACE(name);
    auto g = recipes::builtin_graph(name, {});
    ASSERT_TRUE(g.has_value());
    const int64_t n = recipes::analyze_graph(*g).parameters;
    MemoryQuery q;
    q.microbatch = 2;
    q.optimizer = "adamw";
    MemoryQuery off = q;
    off.offload_optimizer = true;
    const MemoryTerms a = *estimate_memory(*g, q), b = *estimate_memory(*g, off);
    EXPECT_EQ(a.offloaded, 0);
    EXPECT_EQ(b.offloaded, a.optimizer);
    EXPECT_EQ(a.optimizer, 2 * n * 4);
    const int64_t staging = n > kOffloadChunkFloats ? 2 * 2 * kOffloadChunkFloats * 4 : 2 * n * 4;
    EXPECT_EQ(b.optimizer, staging);
    EXPECT_EQ(a.total() - b.total(), a.optimizer - staging);
    EXPECT_EQ(b.parameters, a.parameters);
    EXPECT_EQ(b.activations, a.activations);
  }
}

}  // namespace
}  // namespace dltune::engine
