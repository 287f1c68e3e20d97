// Intra-rank threads (engine/core/thread_pool.h, parallel.h): the pool runs every task once on
// valid thread indices; every op, each of its kernels, and a whole training step of LeNet-5,
// ResNet-20 and GPT-tiny give the same bits on 1, 2, 3 and 4 threads (the engine promises this
// everywhere: task boundaries follow the shapes, reductions run in a fixed order). The
// reference is the same computation on one thread; the numbers themselves are checked against
// PyTorch by torch_ref_test.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sched.h>

#include "engine/core/gemm.h"
#include "engine/core/parallel.h"
#include "engine/core/rng.h"
#include "engine/core/thread_pool.h"
#include "engine/data/dataset.h"
#include "engine/graph/model.h"
#include "engine/train/trainer.h"

namespace dltune::engine {
namespace {

using nlohmann::json;

TEST(ThreadPool, RunsEveryTaskOnceOnValidThreadIndices) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t tasks : {0, 1, 2, 5, 97, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
      std::atomic<bool> bad_thread{false};
      pool.run(tasks, [&](int64_t t, int thread) {
        hits[static_cast<size_t>(t)].fetch_add(1);
        if (thread < 0 || thread >= threads) bad_thread = true;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " threads, " << tasks << " tasks";
      EXPECT_FALSE(bad_thread.load());
    }
  }
}

TEST(ThreadPool, ManyShortRegionsAndNestedRunsInline) {
  ThreadPool pool(3);
  int64_t total = 0;
  for (int r = 0; r < 3000; ++r) {
    std::vector<int64_t> part(7, 0);
    pool.run(7, [&](int64_t t, int thread) {
      // A nested region runs inline on this thread, with this thread's index.
      pool.run(3, [&](int64_t u, int inner) {
        EXPECT_EQ(inner, thread);
        part[static_cast<size_t>(t)] += u + 1;
      });
    });
    for (int64_t p : part) total += p;
  }
  EXPECT_EQ(total, 3000 * 7 * 6);
}

TEST(ThreadPool, WorkersArePinnedInsideTheCallersMask) {
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  const int cpus = CPU_COUNT(&mask);
  {
    ThreadPool pool(2);
    std::atomic<int> outside{0}, single{0};
    pool.run(64, [&](int64_t, int) {
      cpu_set_t mine;
      sched_getaffinity(0, sizeof mine, &mine);
      if (CPU_COUNT(&mine) == 1) single.fetch_add(1);
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &mine) && !CPU_ISSET(c, &mask)) outside.fetch_add(1);
    });
    EXPECT_EQ(outside.load(), 0);
    EXPECT_EQ(single.load(), 64) << "every pool thread is pinned to one CPU";
  }
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_EQ(CPU_COUNT(&after), cpus) << "the caller gets its mask back";
}

std::vector<float> random_vector(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

TEST(ParallelSgemm, SameBitsOnAnyThreadCountAndCloseToOneProduct) {
  struct Case {
    bool ta, tb;
    int64_t M, N, K;
  } cases[] = {{false, false, 300, 257, 70},
               {false, true, 2048, 384, 128},
               {true, false, 128, 512, 2048},
               {false, false, 5, 3, 2}};
  for (const Case& c : cases) {
    const auto a = random_vector(static_cast<size_t>(c.M * c.K), 1);
    const auto b = random_vector(static_cast<size_t>(c.K * c.N), 2);
    const int64_t lda = c.ta ? c.M : c.K, ldb = c.tb ? c.K : c.N;
    std::vector<float> one(static_cast<size_t>(c.M * c.N));
    serial_sgemm(c.ta, c.tb, c.M, c.N, c.K, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, one.data(),
                 c.N);
    std::vector<float> ref;
    for (int threads : {1, 2, 3, 4}) {
      ThreadPool pool(threads);
      std::vector<float> cm(static_cast<size_t>(c.M * c.N), 7.0f);
      parallel_sgemm(pool, c.ta, c.tb, c.M, c.N, c.K, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                     cm.data(), c.N);
      if (ref.empty()) ref = cm;
      ASSERT_EQ(std::memcmp(cm.data(), ref.data(), sizeof(float) * ref.size()), 0)
          << c.M << "x" << c.N << "x" << c.K << " on " << threads << " threads";
      for (size_t i = 0; i < cm.size(); ++i)
        ASSERT_NEAR(cm[i], one[i], 1e-4 * (1.0 + std::abs(one[i])));
    }
  }
}

// The grid tiles C exactly, with inner edges on multiples of 16, blocks of at least 32 rows and
// 64 columns (or the whole side), and of the grids with its block count none packs less
// (mt N + nt M, counted here by brute force).
TEST(GemmGrid, TilesCInAlignedSquarishBlocks) {
  struct Shape {
    int64_t M, N, K;
  } shapes[] = {{256, 512, 784}, {784, 512, 256}, {300, 257, 70}, {2048, 384, 128}, {5, 3, 2}};
  for (const Shape& s : shapes) {
    const GemmGrid g = gemm_grid(s.M, s.N, s.K);
    std::vector<int> covered(static_cast<size_t>(s.M * s.N), 0);
    for (int64_t b = 0; b < g.mt * g.nt; ++b) {
      int64_t m0 = 0, m1 = 0, n0 = 0, n1 = 0;
      gemm_block(g, s.M, s.N, b, &m0, &m1, &n0, &n1);
      EXPECT_TRUE(m0 % 16 == 0 && n0 % 16 == 0) << b;
      EXPECT_TRUE(m1 == s.M || m1 % 16 == 0) << b;
      EXPECT_TRUE(n1 == s.N || n1 % 16 == 0) << b;
      EXPECT_GE(m1 - m0, std::min<int64_t>(s.M, 17)) << b;
      EXPECT_GE(n1 - n0, std::min<int64_t>(s.N, 49)) << b;
      for (int64_t i = m0; i < m1; ++i)
        for (int64_t j = n0; j < n1; ++j) ++covered[static_cast<size_t>(i * s.N + j)];
    }
    EXPECT_EQ(std::count(covered.begin(), covered.end(), 1), s.M * s.N);
    for (int64_t mt = 1; mt <= g.mt * g.nt; ++mt) {
      if ((g.mt * g.nt) % mt != 0 || mt > std::max<int64_t>(1, s.M / 32)) continue;
      const int64_t nt = g.mt * g.nt / mt;
      if (nt > std::max<int64_t>(1, s.N / 64)) continue;
      EXPECT_LE(g.mt * s.N + g.nt * s.M, mt * s.N + nt * s.M) << mt << " x " << nt;
    }
  }
  // mlp b256's first layer: not the thin 8 x 3 blocks of 32 rows the grid once chose.
  const GemmGrid mlp = gemm_grid(256, 512, 784);
  EXPECT_GE(256 / mlp.mt, 64);
}

// Every op (and each of its kernels): forward, input gradient, parameter gradients and state
// after a training forward + backward, as raw bits.
struct Outputs {
  std::vector<float> y, dx, grads, state;
  bool operator==(const Outputs&) const = default;
};

Outputs run_graph(const recipes::Graph& g, int batch, int threads, const KernelChoices& kernels) {
  auto m = Model::build(g, "case");
  EXPECT_TRUE(m.ok()) << m.error().message();
  ThreadPool pool(threads);
  m->set_thread_pool(&pool);
  EXPECT_TRUE(m->set_kernels(kernels).ok());
  m->init_params(3);
  m->reserve(batch);
  Rng rng(9);
  std::vector<float> x(static_cast<size_t>(batch * m->input_numel()));
  const bool tokens = g.input_kind == recipes::InputKind::kTokens;
  for (float& v : x) v = tokens ? static_cast<float>(rng.below(9)) : rng.normal();
  Outputs o;
  const float* y = m->forward(x.data(), batch, true, 42);
  o.y.assign(y, y + batch * m->output_numel());
  const auto dout = random_vector(o.y.size(), 5);
  o.dx.assign(x.size(), 0.0f);
  m->backward(x.data(), dout.data(), batch, {}, false, tokens ? nullptr : o.dx.data());
  o.grads.assign(m->grads(), m->grads() + m->num_params());
  o.state.assign(m->state(), m->state() + m->num_state());
  return o;
}

json node(const char* name, const char* op, json attrs, std::vector<std::string> from = {"input"}) {
  attrs["name"] = name;
  attrs["op"] = op;
  attrs["from"] = from;
  return attrs;
}

TEST(Threads, EveryOpAndKernelGivesTheSameBitsOn1To4Threads) {
  struct Case {
    const char* name;
    json graph;
    int batch;
  };
  auto one = [](std::vector<int> in, json n, const char* kind = "float") {
    return json{{"input", in}, {"input_kind", kind}, {"nodes", json::array({n})}};
  };
  std::vector<Case> cases = {
      {"conv3x3", one({5, 10, 9}, node("op", "conv2d", {{"out", 6}, {"kernel", 3}, {"pad", 1}})),
       19},
      {"conv3x3_16",
       one({16, 8, 8},
           node("op", "conv2d", {{"out", 16}, {"kernel", 3}, {"pad", 1}, {"bias", false}})),
       24},
      {"conv3x3_stride2",
       one({8, 9, 9},
           node("op", "conv2d", {{"out", 16}, {"kernel", 3}, {"stride", 2}, {"pad", 1}})),
       17},
      {"conv5_stride2",
       one({3, 13, 11},
           node("op", "conv2d", {{"out", 4}, {"kernel", 5}, {"stride", 2}, {"pad", 2}})),
       18},
      {"conv_groups",
       one({4, 7, 7}, node("op", "conv2d", {{"out", 6}, {"kernel", 3}, {"pad", 1}, {"groups", 2}})),
       13},
      {"conv_pointwise", one({6, 5, 4}, node("op", "conv2d", {{"out", 5}, {"kernel", 1}})), 21},
      {"conv_direct",
       one({1, 12, 12}, node("op", "conv2d", {{"out", 6}, {"kernel", 5}, {"pad", 2}})), 20},
      {"linear", one({3, 4, 4}, node("op", "linear", {{"out", 40}, {"flatten", true}})), 70},
      {"linear_rows", one({16, 24}, node("op", "linear", {{"out", 72}})), 40},
      {"maxpool", one({3, 9, 9}, node("op", "maxpool", {{"kernel", 3}, {"stride", 2}})), 23},
      {"maxpool2", one({3, 8, 8}, node("op", "maxpool", {{"kernel", 2}, {"stride", 2}})), 23},
      {"avgpool", one({3, 8, 7}, node("op", "avgpool", {{"kernel", 2}, {"stride", 2}})), 23},
      {"adaptive", one({4, 5, 5}, node("op", "adaptive_avgpool", {{"out_h", 1}, {"out_w", 1}})),
       30},
      {"batchnorm", one({5, 6, 6}, node("op", "batchnorm", json::object())), 26},
      {"layernorm", one({24, 20}, node("op", "layernorm", json::object())), 30},
      {"gelu", one({7, 33}, node("op", "gelu", json::object())), 40},
      {"relu", one({3, 50, 50}, node("op", "relu", json::object())), 9},
      {"dropout", one({3, 40, 40}, node("op", "dropout", {{"p", 0.3}})), 9},
      {"lrn", one({7, 5, 5}, node("op", "lrn", {{"size", 5}, {"alpha", 0.5}, {"beta", 0.75}})), 11},
      {"pad_channels", one({4, 6, 5}, node("op", "pad_channels", {{"out", 8}, {"stride", 2}})), 17},
      {"embedding", one({12}, node("op", "embedding", {{"vocab", 9}, {"out", 40}}), "tokens"), 30},
      {"position", one({10, 8}, node("op", "position_embedding", {{"context", 12}})), 30},
      {"attention", one({16, 36}, node("op", "attention", {{"heads", 3}})), 10},
      {"add_concat",
       json{{"input", {4, 6, 6}},
            {"input_kind", "float"},
            {"nodes", json::array({node("a", "conv2d", {{"out", 4}, {"kernel", 3}, {"pad", 1}}),
                                   node("s", "add", json::object(), {"a", "input"}),
                                   node("r", "relu", json::object(), {"s"}),
                                   node("c", "concat", json::object(), {"r", "input"})})}},
       15},
  };
  int checked = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto g = recipes::graph_from_json(c.graph);
    ASSERT_TRUE(g.ok()) << g.error().message();
    auto probe = Model::build(*g, "probe");
    ASSERT_TRUE(probe.ok()) << probe.error().message();
    // Every kernel of every node with a choice, one at a time.
    std::vector<KernelChoices> variants = {{}};
    for (int i = 0; i < probe->num_nodes(); ++i)
      for (const std::string& k : probe->kernel_candidates(i))
        variants.push_back({{g->nodes[static_cast<size_t>(i)].name, k}});
    for (const KernelChoices& v : variants) {
      const std::string what = v.empty() ? "defaults" : v.begin()->first + "=" + v.begin()->second;
      SCOPED_TRACE(what);
      const Outputs ref = run_graph(*g, c.batch, 1, v);
      for (int threads : {2, 3, 4}) {
        const Outputs got = run_graph(*g, c.batch, threads, v);
        EXPECT_TRUE(got.y == ref.y) << "forward differs on " << threads << " threads";
        EXPECT_TRUE(got.dx == ref.dx) << "input gradient differs on " << threads << " threads";
        EXPECT_TRUE(got.grads == ref.grads) << "parameter gradients differ on " << threads;
        EXPECT_TRUE(got.state == ref.state) << "state differs on " << threads << " threads";
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);
}

// A whole training step (forward, loss, backward, clipping, optimizer) of each model: the
// parameters after two steps, bit for bit.
std::vector<float> train_params(TrainConfig c, const Dataset& data, int threads) {
  c.threads = threads;
  auto t = Trainer::create(c, nullptr, data, nullptr);
  EXPECT_TRUE(t.ok()) << t.error().message();
  for (int s = 0; s < 2; ++s) EXPECT_TRUE((*t)->step().ok());
  const Model& m = (*t)->model();
  std::vector<float> p(m.params(), m.params() + m.num_params());
  p.insert(p.end(), m.state(), m.state() + m.num_state());
  return p;
}

// `count` windows of `context` byte ids (and their next bytes) of a fixed letter sequence.
Dataset letters(int64_t count, int64_t context) {
  Dataset d;
  d.name = "letters";
  d.shape = {context};
  d.classes = 256;
  d.label_width = context;
  d.size = count;
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t t = 0; t <= context; ++t) {
      const int64_t k = i * 5 + t;
      const auto b = static_cast<int32_t>('a' + (k * 7 + k / 13) % 26);
      if (t < context) d.images.push_back(static_cast<float>(b));
      if (t > 0) d.labels.push_back(b);
    }
  }
  return d;
}

TEST(Threads, TrainingStepsOfLenetResnetGptGiveTheSameBitsOn1To4Threads) {
  struct Case {
    TrainConfig c;
    Dataset data;
  };
  std::vector<Case> cases;
  TrainConfig lenet;
  lenet.model = "lenet5";
  lenet.global_batch = 24;
  lenet.heldout_size = 0;
  cases.push_back({lenet, synthetic_digits(96, 1)});
  TrainConfig resnet;
  resnet.model = "resnet20";
  resnet.global_batch = 12;
  resnet.heldout_size = 0;
  cases.push_back({resnet, synthetic_cifar(48, 2)});
  TrainConfig gpt;
  gpt.model = "gpt-tiny";
  gpt.data = "text:gpt";
  gpt.optimizer = "adamw";
  gpt.clip_grad_norm = 1.0;
  gpt.global_batch = 6;
  gpt.heldout_size = 0;
  gpt.input = {32};
  cases.push_back({gpt, letters(64, 32)});
  for (const Case& k : cases) {
    SCOPED_TRACE(k.c.model);
    const std::vector<float> ref = train_params(k.c, k.data, 1);
    for (int threads : {2, 3, 4}) {
      const std::vector<float> got = train_params(k.c, k.data, threads);
      ASSERT_EQ(got.size(), ref.size());
      EXPECT_EQ(std::memcmp(got.data(), ref.data(), sizeof(float) * ref.size()), 0)
          << "parameters after two steps differ on " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace dltune::engine
