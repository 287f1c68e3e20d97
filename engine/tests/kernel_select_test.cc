// Per-node kernel choice (engine/graph/kernel_select.h): measuring every candidate of every node
// with a choice, the choices as data the model and the trainer take back (and refuse when they
// name a node or kernel that does not exist), every kernel computing the same function, and the
// memory model counting each kernel's, thread count's and precision's scratch exactly.
#include "engine/graph/kernel_select.h"

#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

#include "engine/data/dataset.h"
#include "engine/graph/batch_buffers.h"
#include "engine/tests/torch_fixtures.h"
#include "engine/train/trainer.h"
#include "planning/memory_model.h"
#include "recipes/model/builtins.h"

namespace dltune::engine {
namespace {

TEST(KernelSelect, TimesEveryCandidateAndKeepsTheFastest) {
  auto g = recipes::builtin_graph("lenet5", {});
  ASSERT_TRUE(g.has_value());
  auto m = Model::build(*g, "lenet5");
  ASSERT_TRUE(m.ok());
  m->init_params(1);
  const std::vector<float> before(m->params(), m->params() + m->num_params());
  KernelSelectOptions opt;
  opt.batch = 4;
  opt.repeats = 3;
  auto report = select_kernels(*m, opt);
  ASSERT_TRUE(report.ok()) << report.error().message();
  ASSERT_EQ(static_cast<int>(report->size()), m->num_nodes());
  int measured = 0;
  for (const NodeKernelChoice& c : *report) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(m->kernel(c.node), c.chosen) << "the model runs what the report chose";
    if (c.timings.empty()) {
      EXPECT_EQ(m->kernel_candidates(c.node).size(), 1u);
      continue;
    }
    ++measured;
    ASSERT_EQ(c.timings.size(), m->kernel_candidates(c.node).size());
    const KernelTiming* best = nullptr;
    for (const KernelTiming& t : c.timings) {
      EXPECT_EQ(t.samples, opt.repeats);
      EXPECT_GT(t.median_s, 0.0);
      EXPECT_LE(t.min_s, t.median_s);
      EXPECT_GE(t.max_s, t.median_s);
      if (best == nullptr || t.median_s < best->median_s) best = &t;
    }
    EXPECT_EQ(best->kernel, c.chosen);
  }
  // Every node with more than one candidate was timed: the first convolution always (direct
  // and im2col), the second where oneDNN is built in.
  int with_choice = 0;
  for (int i = 0; i < m->num_nodes(); ++i) with_choice += m->kernel_candidates(i).size() > 1;
  EXPECT_EQ(measured, with_choice);
  EXPECT_GE(measured, 1) << "LeNet-5's first convolution has direct and im2col";
  EXPECT_EQ(std::memcmp(before.data(), m->params(), sizeof(float) * before.size()), 0)
      << "timing must not touch the parameters";
  const nlohmann::json j = kernel_report_json(*report);
  EXPECT_EQ(j.size(), report->size());
  EXPECT_NE(kernel_report_text(*report).find("conv2d"), std::string::npos);
  // The choices are data: a fresh model given them runs the same kernels.
  auto fresh = Model::build(*g, "lenet5");
  ASSERT_TRUE(fresh->set_kernels(choices_of(*report)).ok());
  EXPECT_EQ(fresh->kernels(), m->kernels());
}

// ResNet-20 repeats its blocks: a node with the same op and shapes as one measured takes that
// one's choice unmeasured; a time limit leaves nodes unmeasured on the kernel they had.
TEST(KernelSelect, RepeatedShapesAreMeasuredOnceAndALimitStopsMeasuring) {
  auto g = recipes::builtin_graph("resnet20", {});
  ASSERT_TRUE(g.has_value());
  auto m = Model::build(*g, "resnet20");
  ASSERT_TRUE(m.ok());
  m->init_params(1);
  KernelSelectOptions opt;
  opt.batch = 2;
  opt.repeats = 1;
  auto report = select_kernels(*m, opt);
  ASSERT_TRUE(report.ok()) << report.error().message();
  int measured = 0, reused = 0;
  for (const NodeKernelChoice& c : *report) {
    if (c.reason.rfind("fastest of", 0) == 0) ++measured;
    if (c.reason.rfind("as ", 0) != 0) continue;
    ++reused;
    // The twin it names was measured, with the same op and input shape, and chose alike.
    const std::string twin = c.reason.substr(3, c.reason.find(':') - 3);
    const auto it = std::find_if(report->begin(), report->end(),
                                 [&](const NodeKernelChoice& o) { return o.name == twin; });
    ASSERT_NE(it, report->end()) << c.reason;
    EXPECT_EQ(it->reason.rfind("fastest of", 0), 0u) << it->reason;
    EXPECT_EQ(it->chosen, c.chosen);
    EXPECT_EQ(m->op(it->node).in_shapes(), m->op(c.node).in_shapes()) << c.name;
    EXPECT_EQ(m->kernel(c.node), c.chosen);
  }
  // layer1's six 3x3 convolutions on 16x32x32 are one shape: at most one of them measured.
  EXPECT_GE(reused, 5);
  EXPECT_GE(measured, 3);  // a 3x3 convolution in each of the three stages at least
  KernelSelectOptions limited = opt;
  limited.seconds = 1e-9;  // spent before the first node
  auto fresh = Model::build(*g, "resnet20");
  ASSERT_TRUE(fresh.ok());
  fresh->init_params(1);
  const auto defaults = fresh->kernels();
  auto none = select_kernels(*fresh, limited);
  ASSERT_TRUE(none.ok());
  for (const NodeKernelChoice& c : *none) {
    EXPECT_TRUE(c.timings.empty()) << c.name;
    if (fresh->kernel_candidates(c.node).size() > 1) {
      EXPECT_EQ(c.reason, "not measured: the time limit") << c.name;
    }
  }
  EXPECT_EQ(fresh->kernels(), defaults);
}

// A node reading the model's input computes no input gradient (half a convolution's backward):
// its timing is not another node's of the same op and shapes that does.
TEST(KernelSelect, ANodeWithoutInputGradientIsNotAnotherNodesTwin) {
  recipes::Graph g;
  g.input = {16, 8, 8};
  recipes::OpAttrs c;
  c.out = 16, c.kernel = 3, c.pad = 1;
  g.nodes = {{"first", recipes::OpKind::kConv2d, c, {"input"}},
             {"second", recipes::OpKind::kConv2d, c, {"first"}},
             {"third", recipes::OpKind::kConv2d, c, {"second"}}};
  auto m = Model::build(g, "three-convs");
  ASSERT_TRUE(m.ok()) << m.error().message();
  m->init_params(1);
  if (m->kernel_candidates(0).size() < 2) GTEST_SKIP() << "one convolution kernel only";
  KernelSelectOptions opt;
  opt.batch = 2;
  opt.repeats = 1;
  auto report = select_kernels(*m, opt);
  ASSERT_TRUE(report.ok()) << report.error().message();
  const auto& r = *report;
  EXPECT_EQ(r[0].reason.rfind("fastest of", 0), 0u) << r[0].reason;
  EXPECT_EQ(r[1].reason.rfind("fastest of", 0), 0u) << r[1].reason;  // not "as first"
  EXPECT_EQ(r[2].reason, "as second: same op and shapes") << r[2].reason;
}

TEST(KernelSelect, BadChoicesAreRefusedAndChangeNothing) {
  auto g = recipes::builtin_graph("lenet5", {});
  auto m = Model::build(*g, "lenet5");
  ASSERT_TRUE(m.ok());
  const KernelChoices before = m->kernels();
  auto a = m->set_kernels({{"conv2d2", "im2col"}, {"nosuchnode", "im2col"}});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(a.error().message().find("'nosuchnode'"), std::string::npos) << a.error().message();
  auto b = m->set_kernels({{"conv2d2", "winograd"}});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message().find("no kernel 'winograd'"), std::string::npos);
  EXPECT_NE(b.error().message().find("im2col"), std::string::npos) << "it lists the kernels";
  EXPECT_EQ(m->kernels(), before);
  // And through the trainer's config.
  TrainConfig c;
  c.model = "lenet5";
  c.heldout_size = 0;
  c.kernels = {{"conv2d9", "im2col"}};
  Dataset data = synthetic_digits(64, 1);
  auto t = Trainer::create(c, nullptr, data, nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message().find("key 'kernels'"), std::string::npos) << t.error().message();
}

TEST(KernelSelect, TrainConfigRefusesBadPrecisionAndKernels) {
  TrainConfig c;
  c.model = "lenet5";
  c.precision = "bf16";
  c.kernels = {{"conv2d1", "direct"}, {"conv2d2", "im2col"}};
  ASSERT_TRUE(validate(c).ok()) << validate(c).error().message();
  const std::vector<void (*)(TrainConfig&)> bad = {[](TrainConfig& t) { t.precision = "fp16"; },
                                                   [](TrainConfig& t) {
                                                     t.kernels = {{"conv2d1", ""}};
                                                   },
                                                   [](TrainConfig& t) {
                                                     t.kernels = {{"", "im2col"}};
                                                   }};
  for (auto make_bad : bad) {
    TrainConfig t = c;
    make_bad(t);
    auto r = validate(t);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidInput);
  }
}

TEST(MemoryModel, ThreadsPrecisionAndKernelsAreCountedExactly) {
  recipes::BuiltinOptions gpt;
  gpt.blocks = 2, gpt.width = 32, gpt.heads = 4, gpt.context = 16;
  for (const char* name : {"lenet5", "resnet20", "gpt-tiny"}) {
    auto g = recipes::builtin_graph(
        name, std::string(name) == "gpt-tiny" ? gpt : recipes::BuiltinOptions{});
    ASSERT_TRUE(g.has_value());
    for (int threads : {1, 3}) {
      for (const char* precision : {"fp32", "bf16"}) {
        Precision p;
        parse_precision(precision, &p);
        auto probe = Model::build(*g, name);
        ASSERT_TRUE(probe.ok());
        probe->set_precision(p);  // the kernels offered depend on the precision
        // Every node's last kernel of the engine's own (oneDNN's scratch is the library's to
        // say: Op::library_memory(), checked below).
        KernelChoices last;
        for (int i = 0; i < probe->num_nodes(); ++i) {
          auto k = probe->kernel_candidates(i);
          if (k.back() == "onednn" && k.size() > 1) k.pop_back();
          last[g->nodes[static_cast<size_t>(i)].name] = k.back();
        }
        for (const KernelChoices& k : {KernelChoices{}, last}) {
          SCOPED_TRACE(std::string(name) + " " + precision + " threads " + std::to_string(threads) +
                       (k.empty() ? "" : " last kernels"));
          auto m = Model::build(*g, name);
          ThreadPool pool(threads);
          m->set_thread_pool(&pool);
          m->set_precision(p);
          ASSERT_TRUE(m->set_kernels(k).ok());
          m->reserve(12);
          planning::MemoryQuery q;
          q.microbatch = 12;
          q.compute = {threads, precision, k};
          auto est = planning::estimate_memory(*g, q, batch_buffers);
          ASSERT_TRUE(est.ok()) << est.error().message();
          EXPECT_EQ(est->activations + est->workspace, m->activation_bytes());
        }
      }
    }
  }
}

// oneDNN's convolutions keep scratch only the library knows: the memory model (which plans
// with the engine's own kernels) counts everything else, so it stays below the model's bytes.
TEST(MemoryModel, OnednnScratchIsTheLibrarysOwn) {
  auto g = recipes::builtin_graph("resnet20", {});
  ASSERT_TRUE(g.has_value());
  auto m = Model::build(*g, "resnet20");
  ASSERT_TRUE(m.ok());
  const KernelChoices onednn = test::nodes_offering(*m, *g, "onednn");
  if (onednn.empty()) GTEST_SKIP() << "this build has no oneDNN (DLTUNE_WITH_DNNL)";
  ASSERT_TRUE(m->set_kernels(onednn).ok());
  m->reserve(8);
  planning::MemoryQuery q;
  q.microbatch = 8;
  q.compute.kernels = onednn;
  auto est = planning::estimate_memory(*g, q, batch_buffers);
  ASSERT_TRUE(est.ok()) << est.error().message();
  EXPECT_LT(est->activations + est->workspace, m->activation_bytes());
  q.compute.kernels["nosuchnode"] = "im2col";
  EXPECT_FALSE(planning::estimate_memory(*g, q, batch_buffers).ok());
}

}  // namespace
}  // namespace dltune::engine
