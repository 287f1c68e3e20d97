// Per-node kernel choice (engine/graph/kernel_select.h): measuring every candidate of every node
// with a choice, the choices as data the model and the trainer take back (and refuse when they
// name a node or kernel that does not exist), every kernel computing the same function, and the
// memory model counting each kernel's, thread count's and precision's scratch exactly.
#include "engine/graph/kernel_select.h"

#include <cstring>

#include <gtest/gtest.h>

#include "engine/data/dataset.h"
#include "engine/graph/memory_model.h"
#include "engine/train/trainer.h"
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
  EXPECT_GE(measured, 2) << "both convolutions have a choice (im2col at least, and another)";
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

TEST(KernelSelect, TrainConfigCarriesPrecisionAndKernels) {
  TrainConfig c;
  c.precision = "bf16";
  c.kernels = {{"conv2d1", "direct"}, {"conv2d2", "im2col"}};
  c.threads = 3;
  auto back = parse_train_config(to_json(c));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->precision, "bf16");
  EXPECT_EQ(back->kernels, c.kernels);
  EXPECT_EQ(back->threads, 3);
  for (const char* bad : {R"({"precision": "fp16"})", R"({"precision": 16})",
                          R"({"kernels": ["im2col"]})", R"({"kernels": {"conv1": 3}})"}) {
    auto r = parse_train_config(bad);
    ASSERT_FALSE(r.ok()) << bad;
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
        KernelChoices last;       // every node's last kernel
        for (int i = 0; i < probe->num_nodes(); ++i)
          last[g->nodes[static_cast<size_t>(i)].name] = probe->kernel_candidates(i).back();
        for (const KernelChoices& k : {KernelChoices{}, last}) {
          SCOPED_TRACE(std::string(name) + " " + precision + " threads " + std::to_string(threads) +
                       (k.empty() ? "" : " last kernels"));
          auto m = Model::build(*g, name);
          ThreadPool pool(threads);
          m->set_thread_pool(&pool);
          m->set_precision(p);
          ASSERT_TRUE(m->set_kernels(k).ok());
          m->reserve(12);
          MemoryQuery q;
          q.microbatch = 12;
          q.threads = threads;
          q.precision = precision;
          q.kernels = k;
          auto est = estimate_memory(*g, q);
          ASSERT_TRUE(est.ok()) << est.error().message();
          EXPECT_EQ(est->activations + est->workspace, m->activation_bytes());
        }
      }
    }
  }
}

}  // namespace
}  // namespace dltune::engine
