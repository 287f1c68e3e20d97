// The plan a launch runs (launch_plan.h) when the databases hold one: the key covers every
// setting of the recipe, a cached plan never overrides what the recipe fixes, and a cached plan
// that does not fit (implausible, another job shape, unreadable) is skipped with a warning,
// never a failure. All with --no-tune (no ranks are started).
#include "launcher/flow/launch_plan.h"

#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <stdlib.h>

#include "common/strings.h"
#include "launcher/flow/launch_layout.h"
#include "recipes/plan.h"
#include "topology/topology.h"
#include "tuner/db/key.h"
#include "tuner/db/store.h"

#include "dltune/config.h"

namespace dltune::launcher {
namespace {

namespace tdb = tuner::db;

// The quickstart's settings (recipes/quickstart.yaml) with `edit` applied.
recipes::Recipe quickstart(const std::string& from = "", const std::string& to = "") {
  std::string text =
      "name: q\nmodel: lenet\ndata: {kind: synthetic-digits, samples: 20000, heldout: 0.1}\n"
      "training:\n  steps: 300\n  batch: {per_rank: 64}\n  scaling: weak\n"
      "  optimizer: {lr: 0.02, momentum: 0.9, weight_decay: 0.0005, lr_reference_batch: 128}\n"
      "  schedule: {kind: cosine, warmup_steps: 20}\n"
      "tune: {budget: 20}\nlaunch: {ranks: 2, ranks_per_node: 2}\n";
  if (!from.empty()) text.replace(text.find(from), from.size(), to);
  recipes::ParseOutcome o = recipes::parse_recipe(text, "q.yaml", "/tmp");
  EXPECT_TRUE(o.ok()) << (o.problems.empty() ? "" : o.problems[0].to_string());
  return o.recipe;
}

class LaunchPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dltune-launch-plan-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto topo = topology::load_xml(std::string(DLTUNE_SOURCE_DIR) +
                                   "/topology/tests/data/mpibind_cts1-pascal.xml");
    ASSERT_TRUE(topo.ok()) << topo.error().message();
    topo_ = *topo;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  PlanRequest request(const recipes::Recipe& recipe) {
    PlanRequest r;
    r.recipe = recipe;
    r.job = {1, 2};
    r.topo = topo_;
    r.layers.user_db = dir_ + "/user.db";
    r.no_tune = true;
    r.work_dir = dir_ + "/work";
    return r;
  }
  tdb::Key key_for(const recipes::Recipe& recipe) {
    return tuner::db::make_key(topo_, {1, 2}, recipes::recipe_signature(recipe), false);
  }
  // Stores `plan_json` under `key` as a row written by another program would be: no checks;
  // `signed_by` as an import marks it ("unsigned": from a bundle no trusted key signed).
  void plant(const tdb::Key& key, const std::string& plan_json, const std::string& signed_by = "") {
    auto db = tdb::open_for_writing(dir_ + "/user.db");
    ASSERT_TRUE(db.ok()) << db.error().message();
    auto st = db->connection().prepare(
        "INSERT INTO plans(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, "
        "family, plan_json, site, host, user_name, writer_version, created_at, signed_by) "
        "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'x', 'h', 'u', '0.1.0', 1700000000, ?11)");
    ASSERT_TRUE(st.ok());
    st->bind(1, key.fingerprint)
        .bind(2, key.versions.mpi)
        .bind(3, key.versions.pmix)
        .bind(4, key.versions.nccl)
        .bind(5, key.versions.dltune)
        .bind(6, key.shape.nodes)
        .bind(7, key.shape.ranks_per_node)
        .bind(8, key.recipe)
        .bind(9, key.family)
        .bind(10, plan_json)
        .bind(11, signed_by);
    ASSERT_TRUE(st->run().ok());
  }
  static recipes::Plan plan(int64_t per_rank, int64_t warmup, uint64_t bucket) {
    recipes::Plan p = recipes::default_plan(1, 2, per_rank, recipes::Algorithm::kRing);
    p.training.warmup_steps = warmup;
    p.training.bucket_bytes = bucket;
    return p;
  }

  std::string dir_;
  topology::Topology topo_;
};

// The report: a copy of the quickstart with per_rank 32 and warmup 5 trained at 64 and 20 from
// the quickstart's plan; --dry-run of the quickstart picked up per-rank 128 from another
// recipe's plan of the same model. Each recipe now has its own key.
TEST_F(LaunchPlan, AnotherRecipesPlanIsNeverUsed) {
  const recipes::Recipe q = quickstart();
  const recipes::Recipe copy =
      quickstart("per_rank: 64}\n  scaling: weak\n", "per_rank: 32}\n  scaling: weak\n");
  recipes::Recipe copy2 = copy;
  copy2.training.schedule.warmup_steps = 5;
  plant(key_for(q), recipes::serialize_plan(plan(64, 20, 4u << 20)));
  plant(key_for(quickstart("per_rank: 64", "per_rank: 128")),
        recipes::serialize_plan(plan(128, 20, 4u << 20)));
  EXPECT_NE(key_for(copy2).recipe, key_for(q).recipe);
  auto c = choose_plan(request(copy2));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->source, "default");
  EXPECT_EQ(c->plan.training.per_rank_batch, 32);
  EXPECT_EQ(c->plan.training.warmup_steps, 5);
  auto mine = choose_plan(request(q));
  ASSERT_TRUE(mine.ok()) << mine.error().message();
  EXPECT_EQ(mine->source, "cache");
  EXPECT_EQ(mine->plan.training.per_rank_batch, 64);
}

// A cached plan under this recipe's own key still loses to every setting the recipe fixes.
TEST_F(LaunchPlan, FixedSettingsWinOverACachedPlan) {
  const recipes::Recipe q =
      quickstart("tune: {budget: 20}", "tune: {budget: 20}\ncomm: {bucket: 1MiB}");
  plant(key_for(q), recipes::serialize_plan(plan(128, 5, 16u << 20)));
  auto c = choose_plan(request(q));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->source, "cache");
  EXPECT_EQ(c->plan.training.per_rank_batch, 64);
  EXPECT_EQ(c->plan.training.global_batch, 128);
  EXPECT_EQ(c->plan.training.warmup_steps, 20);
  EXPECT_EQ(c->plan.training.bucket_bytes, 1u << 20);
  std::string notes;
  for (const auto& n : c->notes) notes += n + "\n";
  EXPECT_NE(notes.find("per_rank_batch: the recipe fixes 64, the plan had 128"), std::string::npos)
      << notes;
  EXPECT_NE(notes.find("bucket_bytes"), std::string::npos) << notes;
}

// Plans no validation would have let in (another program wrote the database): each is skipped
// with one warning and the launch runs the recipe's own settings; never exit 2 forever.
TEST_F(LaunchPlan, ACachedPlanThatDoesNotFitIsSkippedWithAWarning) {
  const recipes::Recipe q = quickstart();
  const auto edited = [](auto edit) {
    recipes::Plan p = plan(64, 20, 4u << 20);
    edit(p);
    return recipes::serialize_plan(p);
  };
  const std::string cases[] = {
      edited([](recipes::Plan& p) { p.training.warmup_steps = 1000000000000000000; }),
      edited([](recipes::Plan& p) {
        p.training.per_rank_batch = 1000000000000;
        p.training.global_batch = 2000000000000;
      }),
      edited([](recipes::Plan& p) {
        p.job = {64, 8};
        p.training.global_batch = 64 * 512;
      }),
      "{\"version\": 1}",
      std::string(100000, '['),
  };
  for (const std::string& bad : cases) {
    std::filesystem::remove(dir_ + "/user.db");
    plant(key_for(q), bad);
    auto c = choose_plan(request(q));
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->source, "default") << bad.substr(0, 200);
    EXPECT_EQ(c->plan.training.per_rank_batch, 64);
    EXPECT_EQ(c->plan.training.warmup_steps, 20);
    std::string skipped;
    for (const std::string& n : c->notes)
      if (n.find("is not used") != std::string::npos) skipped = n;
    EXPECT_NE(skipped.find("warning: the cached plan in"), std::string::npos) << bad.substr(0, 200);
    EXPECT_NE(skipped.find("running the recipe's own settings"), std::string::npos) << skipped;
    std::printf("  %s\n", skipped.c_str());
  }
}

// The run's length is not in the tuning key (issue 42): a plan tuned for a longer run, whose
// warm-up this run's 300 steps would never finish, is served with the warm-up its lr rule gives
// for 300 steps, and both the adjustment and the length it was tuned for are said.
TEST_F(LaunchPlan, ACachedPlanOfAnotherLengthGetsThisRunsWarmup) {
  const recipes::Recipe q = quickstart();
  recipes::Plan p = plan(64, 20, 4u << 20);
  p.training.warmup_steps = 301;
  p.provenance.run_steps = 6000;
  plant(key_for(q), recipes::serialize_plan(p));
  auto c = choose_plan(request(q));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->source, "cache");
  EXPECT_EQ(c->plan.training.warmup_steps, 20);  // the recipe's: 5 % of 300 is less
  const std::string notes = strings::join(c->notes, "\n");
  EXPECT_NE(notes.find("cached plan adjusted: training.warmup_steps: 20 for this run's 300 steps, "
                       "the plan had 301"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("cached plan tuned for a run of 6000 steps, used for this run of 300"),
            std::string::npos)
      << notes;
}

// Issue 42 item 3: the learning rate is not in the key. A plan tuned with another rate is used
// where none of its trials scaled the rate (their throughput does not depend on it), with a note;
// where one did (whether a scaled rate diverges depends on the rate), the launch tunes again. The
// stored trials decide; a plan stored without them, the candidates a tuning would generate.
TEST_F(LaunchPlan, APlanTunedWithAnotherLearningRateIsUsedOnlyWhereNoTrialScaledIt) {
  // The quickstart's lr is meant for a global batch of 128, this job's: no candidate scales it.
  recipes::Recipe q = quickstart("lr: 0.02", "lr: 0.03");
  recipes::Plan p = plan(64, 20, 4u << 20);
  p.provenance.tuned_lr = 0.02;
  plant(key_for(q), recipes::serialize_plan(p));
  EXPECT_EQ(key_for(q).recipe, key_for(quickstart()).recipe);  // the rate is not in the key
  auto c = choose_plan(request(q));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->source, "cache");
  std::string notes = strings::join(c->notes, "\n");
  EXPECT_NE(notes.find("cached plan tuned with lr 0.02, used with this run's lr 0.03: none of its "
                       "trials scaled the lr"),
            std::string::npos)
      << notes;

  // Meant for 64: the 128 of every candidate scales it x2, so the rate mattered.
  recipes::Recipe scaled = quickstart("lr_reference_batch: 128", "lr_reference_batch: 64");
  scaled.training.optimizer.lr = 0.03;
  recipes::Plan ps = p;
  ps.training.lr_scale = 2.0;
  plant(key_for(scaled), recipes::serialize_plan(ps));
  c = choose_plan(request(scaled));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->source, "default");  // --no-tune: not tuned again here, but not used either
  notes = strings::join(c->notes, "\n");
  EXPECT_NE(notes.find("it was tuned with lr 0.02, this run has lr 0.03, and its trials scaled "
                       "the lr"),
            std::string::npos)
      << notes;

  // The same plan, but its stored trials all ran the unscaled rate: used.
  {
    auto db = tdb::open_for_writing(dir_ + "/user.db");
    ASSERT_TRUE(db.ok());
    auto stored = db->find_exact(key_for(scaled));
    ASSERT_TRUE(stored.ok() && stored->has_value());
    tdb::RecipeTrial t;
    t.key = key_for(scaled);
    t.label = "b64 weak bucket=4MiB overlap lr=none";
    t.per_rank_batch = 64;
    t.global_batch = 128;
    t.scaling = "weak";
    t.bucket_bytes = 4u << 20;
    t.overlap = true;
    t.lr_scale = 1.0;
    t.steps = 8;
    t.samples_per_s = 5000;
    t.step_s = 0.025;
    t.provenance = tdb::local_provenance();
    ASSERT_TRUE(db->put_results(&**stored, {}, std::vector<tdb::RecipeTrial>{t}).ok());
  }
  c = choose_plan(request(scaled));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->source, "cache") << strings::join(c->notes, "\n");
}

// Issue 43, item 2: every served plan is checked against the recipe it is applied to, not only
// at import: an unsigned plan whose lr scale the recipe's rule would not give is not used (the
// launch diverged at step 5 with lr x1000); one that passes is used with a warning saying it
// came unsigned.
TEST_F(LaunchPlan, AServedPlanIsCheckedAgainstTheRecipeAndSaysWhenUnsigned) {
  const recipes::Recipe q = quickstart();  // lr meant for 128; this job's global batch is 128
  const auto with_lr = [](double lr) {
    recipes::Plan p = plan(64, 20, 4u << 20);
    p.training.lr_scale = lr;
    return recipes::serialize_plan(p);
  };
  const std::pair<double, const char*> refused[] = {
      {1000, "training.lr_scale: 1000 is not plausible"},
      {16,
       "training.lr_scale: x16 is not what the recipe's lr rule gives at global batch 128 "
       "(optimizer.lr_scaling auto from a reference batch of 128: x1 to x1)"},
  };
  for (const auto& [lr, why] : refused) {
    std::filesystem::remove(dir_ + "/user.db");
    plant(key_for(q), with_lr(lr), "unsigned");
    auto c = choose_plan(request(q));
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->source, "default") << lr;
    EXPECT_DOUBLE_EQ(c->plan.training.lr_scale, 1.0);
    EXPECT_EQ(c->signed_by, "");
    std::string notes;
    for (const auto& n : c->notes) notes += n + "\n";
    EXPECT_NE(notes.find(std::string("is not used (") + why), std::string::npos) << notes;
    std::printf("  lr x%g: %s", lr, notes.c_str());
  }
  // A plan the recipe's rule could give, imported unsigned: used, and the notes say so.
  std::filesystem::remove(dir_ + "/user.db");
  plant(key_for(q), with_lr(1.0), "unsigned");
  auto c = choose_plan(request(q));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->source, "cache");
  EXPECT_EQ(c->signed_by, "unsigned");
  ASSERT_EQ(c->notes.size(), 1u);
  EXPECT_EQ(c->notes[0].rfind("warning: the plan cached in " + dir_ +
                                  "/user.db was imported "
                                  "unsigned (no trusted key vouches for it; it says it comes from "
                                  "site 'x')",
                              0),
            0u)
      << c->notes[0];
  // Signed by a trusted key, or made here: no warning.
  for (const char* by : {"siteA", ""}) {
    std::filesystem::remove(dir_ + "/user.db");
    plant(key_for(q), with_lr(1.0), by);
    auto t = choose_plan(request(q));
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->source, "cache");
    EXPECT_EQ(t->signed_by, by);
    EXPECT_TRUE(t->notes.empty()) << t->notes[0];
  }
}

// The layouts the recipe tuner measures beside plain data parallelism, from the layout search's
// answer: the pipelines and the offloaded data parallelism it marks to measure; plain data
// parallelism only says that it fits.
TEST(TuningLayouts, PipelinesAndOffloadedDataParallelismButNotPlainDataParallelism) {
  auto entry = [](int replicas, int stages, recipes::Offload offload) {
    planning::LayoutCandidate c;
    c.layout.replicas = replicas;
    c.layout.stages = stages;
    c.layout.offload = offload;
    if (stages > 1) c.layout.partition = {"a", "b"};
    return c;
  };
  launcher::LayoutAnswer both;
  both.candidates = {entry(2, 1, recipes::Offload::kOptimizer),
                     entry(1, 2, recipes::Offload::kNone)};
  both.to_measure = {0, 1};
  auto none = launcher::tuning_layouts(both);
  EXPECT_FALSE(none.data_parallel_fits);  // only with the optimizer state offloaded
  ASSERT_EQ(none.layouts.size(), 2u);
  EXPECT_EQ(none.layouts[0].offload, recipes::Offload::kOptimizer);
  EXPECT_EQ(none.layouts[0].stages, 1);
  EXPECT_EQ(none.layouts[1].stages, 2);
  launcher::LayoutAnswer dp;
  dp.candidates = {entry(2, 1, recipes::Offload::kNone), entry(1, 2, recipes::Offload::kNone)};
  dp.to_measure = {0};
  auto plain = launcher::tuning_layouts(dp);
  EXPECT_TRUE(plain.data_parallel_fits);
  // Plain data parallelism is the batch candidates'; the 1x2 pipeline is unmarked.
  EXPECT_TRUE(plain.layouts.empty());
}

}  // namespace
}  // namespace dltune::launcher
