// Pipeline layouts in the recipe tuner: the candidates that train them (per-replica batch,
// labels), their families, and tune_recipe() with a fake trial program: the layouts travel in
// the candidates file, the measured winner's layout becomes the plan's, and it survives the
// outcome's JSON; without room for data parallelism only layouts are measured; a near hit's
// pipeline narrows them to its stage count.
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/paths.h"
#include "tuner/recipe_tuning.h"

namespace dltune::tuner {
namespace {

using json = nlohmann::json;
using recipes::ParallelLayout;
using recipes::Scaling;

recipes::Recipe recipe(const std::string& batch, const std::string& scaling) {
  const std::string yaml =
      "name: t\nmodel: lenet\ndata:\n  kind: synthetic-digits\n  samples: 20000\n"
      "training:\n  steps: 300\n  batch:\n" +
      batch + "  scaling: " + scaling +
      "\n  optimizer:\n    lr: 0.05\n    lr_reference_batch: 128\nlaunch:\n  ranks: 4\n";
  auto out = recipes::parse_recipe(yaml, "t.yaml", "/tmp");
  EXPECT_TRUE(out.ok()) << (out.problems.empty() ? "" : out.problems.front().to_string());
  return out.recipe;
}

ParallelLayout layout(int replicas, int stages, int microbatches) {
  ParallelLayout l;
  l.replicas = replicas;
  l.stages = stages;
  l.microbatches = microbatches;
  for (int s = 0; s < stages; ++s)
    l.partition.push_back(s == 0 ? "conv1" : "fc" + std::to_string(s));
  l.reason = "from the memory model";
  l.memory_bytes = 1 << 20;
  l.predicted_sps = 100;
  return l;
}

TEST(RecipeLayouts, PipelinesTrainTheReferenceBatchPerReplica) {
  const recipes::JobShape job{1, 4};
  // Weak scaling: lenet's usual 64 per replica, the global batch grows with the replicas.
  const auto weak = recipe("    per_rank: auto\n", "weak");
  const LayoutBatch wb = layout_reference_batch(weak, 4);
  EXPECT_TRUE(wb.per_replica);
  const auto k = layout_candidates(weak, job, {layout(2, 2, 8), layout(4, 1, 1), layout(1, 4, 16)});
  // The data-parallel entry is not a pipeline candidate; 2x2's replicas reduce their stage's
  // gradients (LeNet's 0.86 MB a stage: one bucket) with overlap on and off; 1x4 reduces nothing.
  ASSERT_EQ(k.size(), 3u);
  for (const RecipeCandidate& c : k) {
    ASSERT_TRUE(c.layout.has_value());
    EXPECT_EQ(c.training.per_rank_batch, wb.samples);
    EXPECT_EQ(c.training.global_batch, wb.samples * c.layout->replicas);
    EXPECT_EQ(c.training.scaling, Scaling::kWeak);
    recipes::Plan p = recipes::default_plan(1, 4, 64, recipes::Algorithm::kRing);
    p.parallel = *c.layout;
    p.training = c.training;
    EXPECT_TRUE(recipes::validate_plan(p).ok()) << validate_plan(p).error().message();
  }
  EXPECT_NE(k[0].label.find(", 2x2 stages m8 1f1b"), std::string::npos) << k[0].label;
  EXPECT_NE(k[1].label.find(", 2x2 stages m8 1f1b"), std::string::npos) << k[1].label;
  EXPECT_TRUE(k[0].training.overlap);
  EXPECT_FALSE(k[1].training.overlap);
  EXPECT_EQ(k[0].training.bucket_bytes, 2u << 20);  // one bucket for everything
  EXPECT_NE(k[0].label.find("bucket=one"), std::string::npos) << k[0].label;
  EXPECT_NE(k[2].label.find(", 1x4 stages m16 1f1b"), std::string::npos) << k[2].label;
  EXPECT_TRUE(k[2].training.overlap);  // one replica: the plan's defaults, not a search
  EXPECT_EQ(k[2].training.bucket_bytes, recipes::TrainingPlan{}.bucket_bytes);
  // Linear lr rule against lr_reference_batch 128: global 128 keeps lr, global 64 halves it.
  EXPECT_DOUBLE_EQ(k[0].training.lr_scale, 1.0);
  EXPECT_DOUBLE_EQ(k[2].training.lr_scale, 0.5);

  // A fixed global batch is split over the replicas; a layout whose replicas do not divide it,
  // or with more micro-batches than its replica's samples, is left out.
  const auto fixed = recipe("    global: 96\n", "strong");
  const LayoutBatch fb = layout_reference_batch(fixed, 6);
  EXPECT_FALSE(fb.per_replica);
  EXPECT_EQ(fb.samples, 96);
  auto l4 = layout(4, 1, 1);  // 96 / 4 = 24
  l4.stages = 2;
  l4.partition = {"conv1", "fc1"};
  l4.replicas = 3;
  const auto s = layout_candidates(fixed, {1, 6}, {l4, layout(2, 3, 8), layout(1, 6, 97)});
  ASSERT_EQ(s.size(), 4u);  // each with overlap on and off
  EXPECT_EQ(s[0].training.per_rank_batch, 32);
  EXPECT_EQ(s[2].training.per_rank_batch, 48);
  EXPECT_EQ(s[2].training.global_batch, 96);
  EXPECT_EQ(s[2].training.scaling, Scaling::kStrong);
}

// Data parallelism that fits only with the optimizer state offloaded (GPU) is a layout of its
// own, with the bucket and overlap variants of any replicated layout; plain data parallelism
// is the batch candidates'.
TEST(RecipeLayouts, OffloadedDataParallelismIsALayoutCandidate) {
  const auto weak = recipe("    per_rank: 64\n", "weak");
  ParallelLayout off = layout(4, 1, 1);
  off.partition.clear();
  off.offload = recipes::Offload::kOptimizer;
  ParallelLayout plain = off;
  plain.offload = recipes::Offload::kNone;
  const auto k = layout_candidates(weak, {1, 4}, {off, plain});
  ASSERT_EQ(k.size(), 4u);  // LeNet's 1.7 MB of gradients: 1 MiB and one bucket, overlap on/off
  for (const RecipeCandidate& c : k) {
    ASSERT_TRUE(c.layout.has_value());
    EXPECT_EQ(c.layout->offload, recipes::Offload::kOptimizer);
    EXPECT_EQ(c.training.global_batch, 4 * 64);
    EXPECT_NE(c.label.find("4x1 stages m1 1f1b offload"), std::string::npos) << c.label;
  }
}

TEST(RecipeLayouts, ALayoutIsAFamilyOfItsOwn) {
  RecipeCandidate dp;
  dp.training.per_rank_batch = 64;
  dp.training.global_batch = 128;
  RecipeCandidate pipe = dp;
  pipe.layout = layout(1, 2, 8);
  RecipeCandidate other = pipe;
  other.layout->microbatches = 4;
  RecipeCandidate same = pipe;
  same.training.bucket_bytes = 1 << 20;  // only communication differs
  same.layout->reason = "another text, the same layout";
  EXPECT_FALSE(trains_alike(dp, pipe));
  EXPECT_FALSE(trains_alike(pipe, other));
  EXPECT_TRUE(trains_alike(pipe, same));
  EXPECT_EQ(trial_trainers({dp, pipe, other, same}, false), 3u);
}

class TuneLayouts : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dltune-recipe-layout-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  RecipeTuneRequest request() const {
    RecipeTuneRequest req;
    req.recipe = recipe("    per_rank: 64\n", "weak");
    req.recipe_path = "t.yaml";
    req.job = {1, 4};
    req.base = recipes::default_plan(1, 4, 64, recipes::Algorithm::kRing);
    req.budget_s = 10;
    req.layouts = {layout(2, 2, 8), layout(1, 4, 16)};
    return req;
  }
  // A fake trial program: every candidate measured once; the 2x2 pipeline is the fastest, the
  // data-parallel ones 500 samples/s. Records the candidates file it read.
  RunRanks trials() {
    return [this](const std::vector<std::string>& args) -> Status {
      auto text = paths::read_file(args.at(4));
      if (!text) return text.error();
      file_ = json::parse(*text);
      std::vector<TrialRecord> ts;
      for (size_t i = 0; i < file_["candidates"].size(); ++i) {
        const json& k = file_["candidates"][i];
        json p = file_["base"];
        p["training"] = k["training"];
        if (k.contains("parallel")) p["parallel"] = k["parallel"];
        auto plan = recipes::plan_from_json(p);  // what the trial program does
        if (!plan) return plan.error();
        TrialRecord t;
        t.candidate = i;
        t.label = k["label"];
        t.steps = 8;
        t.samples_per_s = plan->parallel.stages == 2 ? 900 : plan->parallel.stages == 4 ? 300 : 500;
        t.step_s = static_cast<double>(plan->training.global_batch) / t.samples_per_s;
        ts.push_back(t);
      }
      json out = {{"version", 1}, {"ranks", 4}, {"rounds", 1}, {"trials", trials_to_json(ts)}};
      return paths::write_file_atomic(args.at(6), out.dump());
    };
  }
  std::string dir_;
  json file_;
};

TEST_F(TuneLayouts, TheMeasuredWinnersLayoutIsThePlans) {
  const RecipeTuneRequest req = request();
  auto o = tune_recipe(req, trials(), dir_);
  ASSERT_TRUE(o.ok()) << o.error().message();
  int with_layout = 0;
  for (const json& k : file_["candidates"]) with_layout += k.contains("parallel") ? 1 : 0;
  EXPECT_EQ(with_layout, 3);                  // 2x2 with overlap on and off, 1x4
  EXPECT_GT(file_["candidates"].size(), 2u);  // data parallelism is measured too
  const recipes::Plan& p = o->plan;
  ASSERT_TRUE(recipes::validate_plan(p).ok()) << validate_plan(p).error().message();
  EXPECT_TRUE(recipes::same_layout(p.parallel, layout(2, 2, 8)));
  EXPECT_DOUBLE_EQ(p.parallel.measured_sps, 900);
  EXPECT_EQ(p.parallel.predicted_sps, 100);
  EXPECT_NE(p.parallel.reason.find(
                "from the memory model; measured 900.0 samples/s in the trials, the fastest of"),
            std::string::npos)
      << p.parallel.reason;
  EXPECT_EQ(p.training.global_batch, 128);
  EXPECT_NE(p.provenance.reason.find("2x2 stages m8 1f1b won"), std::string::npos)
      << p.provenance.reason;
  auto back = recipe_outcome_from_json(recipe_outcome_to_json(*o));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->plan, o->plan);
  ASSERT_EQ(back->candidates.size(), o->candidates.size());
  for (size_t i = 0; i < o->candidates.size(); ++i) {
    EXPECT_EQ(back->candidates[i].layout.has_value(), o->candidates[i].layout.has_value());
    EXPECT_EQ(back->candidates[i].training, o->candidates[i].training);
  }
}

TEST_F(TuneLayouts, OnlyLayoutsWhenDataParallelismDoesNotFitAndANearHitNarrowsThem) {
  RecipeTuneRequest req = request();
  req.data_parallel_fits = false;
  auto o = tune_recipe(req, trials(), dir_);
  ASSERT_TRUE(o.ok()) << o.error().message();
  ASSERT_EQ(file_["candidates"].size(), 3u);
  for (const json& k : file_["candidates"]) EXPECT_TRUE(k.contains("parallel"));

  req.hint_layout = layout(2, 4, 8);  // a near hit ran 4 stages: only 1x4 is measured
  req.hint_source = "db: another machine";
  o = tune_recipe(req, trials(), dir_);
  ASSERT_TRUE(o.ok()) << o.error().message();
  ASSERT_EQ(file_["candidates"].size(), 1u);
  EXPECT_EQ(o->plan.parallel.stages, 4);
  EXPECT_NE(o->plan.provenance.reason.find("searched 1 of 3 candidates, narrowed by a near hit"),
            std::string::npos)
      << o->plan.provenance.reason;

  req.layouts.clear();
  req.hint_layout.reset();
  EXPECT_FALSE(tune_recipe(req, trials(), dir_).ok());  // nothing to measure
}

}  // namespace
}  // namespace dltune::tuner
