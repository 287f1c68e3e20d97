// The memory model against what the executor allocates: for one batch in flight, the activation,
// workspace and op-state terms equal Model::activation_bytes() exactly, for chains, residual
// networks and transformers; parameters, gradients and optimizer state follow the layout.
#include "engine/graph/memory_model.h"

#include <gtest/gtest.h>

#include "engine/graph/model.h"
#include "recipes/model/builtins.h"
#include "recipes/model/graph.h"

namespace dltune::engine {
namespace {

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
