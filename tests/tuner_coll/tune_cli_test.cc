// `dltune tune --collectives` with real ranks (mpirun -np 2, or threads without mpirun): the
// plan and the measurements land in the database, the second run is a cache hit, --retune
// measures again, and bad usage exits 2 without writing anything.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "common/paths.h"
#include "recipes/plan.h"
#include "tuner/db/store.h"

#include "dltune/config.h"

namespace dltune {
namespace {

struct CliRun {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

class TuneCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dltune-tune-cli-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    db_ = dir_ + "/user.db";
    unsetenv("DLTUNE_SITE_DB");
    unsetenv("DLTUNE_DB");
  }
  void TearDown() override {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }

  // Runs `dltune ARGS`, capturing stdout and stderr.
  CliRun dltune(const std::string& args) {
    const std::string out = dir_ + "/out.txt", err = dir_ + "/err.txt";
    const std::string cmd =
        std::string(DLTUNE_BIN) + " " + args + " >'" + out + "' 2>'" + err + "'";
    const auto t0 = std::chrono::steady_clock::now();
    const int status = std::system(cmd.c_str());
    CliRun r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    r.out = paths::read_file(out).value_or("");
    r.err = paths::read_file(err).value_or("");
    return r;
  }

  std::string dir_, db_;
};

TEST_F(TuneCli, BadUsageExitsTwoAndWritesNothing) {
  const char* bad[] = {
      "tune",
      "tune recipes/mnist_mlp.yaml",
      "tune --collectives --strategy guess",
      "tune --collectives --max-bytes 2",
      "tune --collectives --min-bytes 12",
      "tune --collectives --max-bytes 2GiB",
      "tune --collectives --max-bytes lots",
      "tune --collectives -n 0",
      "tune --collectives --budget 0",
  };
  for (const char* args : bad) {
    CliRun r = dltune(std::string(args) + " --db " + db_);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("dltune"), std::string::npos) << args;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << ": one line, got\n" << r.err;
  }
  CliRun r = dltune("tune recipes/mnist_mlp.yaml --db " + db_);
  EXPECT_NE(r.err.find("no recipe file or bundled recipe named"), std::string::npos) << r.err;
  for (const char* args : {"tune quickstart --collectives", "tune quickstart -n 0",
                           "tune quickstart --budget -1", "tune quickstart --verify"}) {
    CliRun u = dltune(std::string(args) + " --db " + db_);
    EXPECT_EQ(u.code, 2) << args << "\n" << u.err;
  }
  // A bad recipe: exit 2 with its file:line:col problems, nothing written.
  const std::string bad_recipe = dir_ + "/bad.yaml";
  ASSERT_TRUE(paths::write_file_atomic(bad_recipe,
                                       "model: lenet\ndata: synthetic-digits\n"
                                       "training:\n  steps: 10\n  batch:\n    per_rank: -3\n")
                  .ok());
  CliRun b = dltune("tune " + bad_recipe + " --db " + db_);
  EXPECT_EQ(b.code, 2) << b.err;
  EXPECT_NE(b.err.find("bad.yaml:6:"), std::string::npos) << b.err;
  EXPECT_FALSE(paths::exists(db_));
}

// `dltune tune RECIPE`: one launch of trial trainings, the plan stored under the recipe's
// signature, then a cache hit that runs nothing.
TEST_F(TuneCli, TunesARecipeAndThenHitsTheCache) {
  // The quickstart with `batch: auto` (a recipe that names its batch keeps it).
  const std::string common = "tune " + std::string(DLTUNE_SOURCE_DIR) +
                             "/bench/tuner/lenet-auto.yaml -n 2 --budget 10 --db " + db_;
  CliRun first = dltune(common + " --json");
  ASSERT_EQ(first.code, 0) << first.err;
  const auto j = nlohmann::json::parse(first.out);
  EXPECT_FALSE(j.at("cached").get<bool>());
  const auto& out = j.at("outcome");
  EXPECT_EQ(out.at("ranks").get<int>(), 2);
  EXPECT_GE(out.at("candidates").size(), 8u);
  const auto& trials = out.at("trials").at("trials");
  ASSERT_FALSE(trials.empty());
  // Every trial either measured its candidate or says the budget left it unmeasured (how many
  // a 10 s budget measures depends on the machine's load: the ranks' start-up counts).
  int measured = 0, skipped = 0;
  for (const auto& t : trials) {
    if (t.value("skipped", false)) {
      EXPECT_EQ(t.at("steps").get<int>(), 0) << t.dump();
      EXPECT_NE(t.at("reason").get<std::string>().find("tune.budget ran out"), std::string::npos)
          << t.dump();
      ++skipped;
    } else if (!t.at("failed").get<bool>()) {
      EXPECT_GT(t.at("samples_per_s").get<double>(), 0) << t.dump();
      EXPECT_GT(t.at("steps").get<int>(), 0) << t.dump();
      // The step split: compute and exposed communication per step, and each gradient
      // bucket's allreduce alone (two ranks: there is something to reduce).
      EXPECT_GT(t.at("compute_s").get<double>(), 0) << t.dump();
      EXPECT_GE(t.at("exposed_comm_s").get<double>(), 0) << t.dump();
      ASSERT_FALSE(t.at("allreduce_s").empty()) << t.dump();
      for (const auto& b : t.at("allreduce_s")) EXPECT_GT(b.get<double>(), 0) << t.dump();
      // Its trainer's memory: the model's estimate beside the measured peak (their agreement
      // is launch_pipeline_test's to check).
      EXPECT_GT(t.at("memory_estimate_bytes").get<int64_t>(), 0) << t.dump();
      EXPECT_GT(t.at("memory_peak_bytes").get<int64_t>(), 0) << t.dump();
      ++measured;
    }
  }
  EXPECT_GE(measured, 2);
  EXPECT_EQ(out.at("trials").value("skipped", -1), skipped);
  if (skipped > 0) {
    EXPECT_NE(j.at("plan").at("provenance").at("reason").get<std::string>().find("unmeasured"),
              std::string::npos);
  }
  // Candidates that differ only in bucket and overlap share a trainer: 4 batches x 4
  // communication settings build one model per batch (again only when a family returns).
  const int built = out.at("trials").at("trainers_built").get<int>();
  EXPECT_GE(built, 1);
  EXPECT_LE(built, static_cast<int>(out.at("candidates").size()) / 2) << out.at("trials").dump();
  // Within the budget: the trials stop starting rounds that would overrun it (one round of
  // set-up and steps may finish past it on a loaded machine).
  EXPECT_LT(out.at("trials").at("tuning_s").get<double>(), 10 * 2.5);

  auto plan = recipes::plan_from_json(j.at("plan"));
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->provenance.source, recipes::PlanSource::kTuned);
  EXPECT_GT(plan->provenance.measured_sps, 0);
  EXPECT_NE(plan->provenance.reason.find("samples/s"), std::string::npos);
  EXPECT_EQ(plan->training.global_batch, plan->training.per_rank_batch * 2);
  EXPECT_EQ(plan->job, (recipes::JobShape{1, 2}));
  ASSERT_TRUE(plan->collectives.count(recipes::Collective::kAllreduce));

  auto db = tuner::db::TuningDb::open(db_, tuner::db::OpenMode::kReadOnly);
  ASSERT_TRUE(db.ok()) << db.error().message();
  auto plans = db->plans();
  ASSERT_TRUE(plans.ok());
  ASSERT_EQ(plans->size(), 1u);
  EXPECT_EQ(plans->front().key.recipe.size(), 64u);  // the recipe signature
  EXPECT_EQ(plans->front().key.shape.ranks_per_node, 2);
  auto stored = recipes::parse_plan(plans->front().plan_json);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(*stored, *plan);
  // Every measured trial is stored with its step split and its memory.
  auto rows = db->recipe_trials();
  ASSERT_TRUE(rows.ok()) << rows.error().message();
  int split = 0;
  for (const auto& r : *rows) {
    if (r.failed) continue;
    EXPECT_TRUE(r.compute_s.has_value() && *r.compute_s > 0);
    EXPECT_TRUE(r.exposed_comm_s.has_value());
    EXPECT_FALSE(r.allreduce_s.empty());
    EXPECT_TRUE(r.memory_estimate_bytes.has_value() && r.memory_peak_bytes.has_value());
    ++split;
  }
  EXPECT_EQ(split, measured);

  CliRun second = dltune(common);
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.out.find("cached in " + db_), std::string::npos) << second.out;
  // The trial table's header line appears only when trials run (the cached plan's reason may
  // still say which round its search was cut short in).
  EXPECT_EQ(second.out.find("successive halving"), std::string::npos) << "no trials ran:\n"
                                                                      << second.out;
  EXPECT_LT(second.seconds, first.seconds);
  CliRun second_json = dltune(common + " --json");
  ASSERT_EQ(second_json.code, 0) << second_json.err;
  const auto k = nlohmann::json::parse(second_json.out);
  EXPECT_TRUE(k.at("cached").get<bool>());
  EXPECT_EQ(k.at("plan"), j.at("plan"));
}

// A learning rate this model cannot train with: every trial diverges (the loss explodes or
// turns NaN, whichever the trial sees first), each is recorded as failed with that reason, and
// the command fails saying why, storing no plan.
TEST_F(TuneCli, DivergingTrialsFailWithTheirReasonAndStoreNothing) {
  auto text = paths::read_file(std::string(DLTUNE_SOURCE_DIR) + "/bench/tuner/lenet-auto.yaml");
  ASSERT_TRUE(text.ok());
  const size_t at = text->find("lr: 0.02");
  ASSERT_NE(at, std::string::npos);
  text->replace(at, 8, "lr: 1e20");
  const std::string recipe = dir_ + "/too-hot.yaml";
  ASSERT_TRUE(paths::write_file_atomic(recipe, *text).ok());
  CliRun r = dltune("tune " + recipe + " -n 2 --budget 20 --db " + db_);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("diverged: the loss"), std::string::npos) << r.err;
  auto db = tuner::db::TuningDb::open(db_, tuner::db::OpenMode::kReadOnly);
  if (db.ok()) {
    auto plans = db->plans();
    ASSERT_TRUE(plans.ok());
    EXPECT_TRUE(plans->empty());
  }
}

// The quickstart with its lr meant for a global batch of 64: at 2 ranks (global 128) linear
// scaling doubles it and LeNet diverges, square-root scaling trains. With lr_scaling: auto
// the tuner falls back to square root and says so; with linear the command fails with the
// divergence (the ranks' mean loss rising, or turning NaN), storing no plan.
TEST_F(TuneCli, LinearLrDivergingFallsBackToSquareRootScaling) {
  auto text = paths::read_file(std::string(DLTUNE_SOURCE_DIR) + "/recipes/quickstart.yaml");
  ASSERT_TRUE(text.ok());
  const std::string ref = "lr_reference_batch: 128";
  const size_t at = text->find(ref);
  ASSERT_NE(at, std::string::npos);
  text->replace(at, ref.size(), "lr_reference_batch: 64");
  const std::string recipe = dir_ + "/hot.yaml";
  ASSERT_TRUE(paths::write_file_atomic(recipe, *text).ok());
  // The premise needs the trainer to run past its 20-step warm-up within the budget, which
  // counts the ranks' start-up: 40 s leaves room on a loaded 2-core machine (250 samples/s).
  CliRun r = dltune("tune " + recipe + " -n 2 --budget 40 --db " + db_ + " --json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j.at("plan").at("training").at("lr_scale").get<double>(), std::sqrt(2.0), 1e-9)
      << r.out;
  const std::string why = j.at("plan").at("provenance").at("reason").get<std::string>();
  EXPECT_NE(why.find("lr=sqrt won"), std::string::npos) << why;
  EXPECT_NE(why.find("so square-root lr was tried"), std::string::npos) << why;

  text->replace(text->find("lr_reference_batch: 64"), 22,
                "lr_reference_batch: 64\n    lr_scaling: linear");
  const std::string linear = dir_ + "/hot-linear.yaml";
  ASSERT_TRUE(paths::write_file_atomic(linear, *text).ok());
  const std::string db2 = dir_ + "/linear.db";
  CliRun l = dltune("tune " + linear + " -n 2 --budget 40 --db " + db2);
  EXPECT_EQ(l.code, 1) << l.out << l.err;
  EXPECT_NE(l.err.find("diverged: the loss"), std::string::npos) << l.err;
  EXPECT_EQ(l.err.find("square-root"), std::string::npos) << l.err;
}

// A trial step that fails on every rank at once (as running out of memory does) fails its
// candidate and the search goes on; one that fails on one rank only leaves the ranks in
// different collectives: the trial ranks stop at once, saying which rank and why, instead of
// waiting out the 300 s communication timeout. (DLTUNE_FAULT_TRIAL_STEP injects the failure.)
TEST_F(TuneCli, AStepFailingOnOneRankEndsTheSearchPromptly) {
  setenv("DLTUNE_FAULT_TRIAL_STEP", "*:3", 1);
  CliRun all = dltune("tune quickstart -n 2 --budget 20 --db " + db_);
  EXPECT_EQ(all.code, 0) << all.out << all.err;
  EXPECT_NE(all.out.find("failed: injected step failure"), std::string::npos) << all.out;

  setenv("DLTUNE_FAULT_TRIAL_STEP", "1:3", 1);
  CliRun one = dltune("tune quickstart -n 2 --retune --budget 20 --db " + db_);
  unsetenv("DLTUNE_FAULT_TRIAL_STEP");
  EXPECT_EQ(one.code, 1) << one.out << one.err;
  EXPECT_NE(one.err.find("failed on rank 1 (injected step failure"), std::string::npos) << one.err;
  EXPECT_NE(one.err.find("but not on every rank"), std::string::npos) << one.err;
  EXPECT_LT(one.seconds, 120) << "waited for the communication timeout";
}

TEST_F(TuneCli, TunesStoresAndThenHitsTheCache) {
  const std::string common = "tune --collectives -n 2 --max-bytes 1KiB --db " + db_;
  CliRun first = dltune(common + " --json");
  ASSERT_EQ(first.code, 0) << first.err;
  auto j = nlohmann::json::parse(first.out);
  EXPECT_FALSE(j.at("cached").get<bool>());
  EXPECT_EQ(j.at("db").get<std::string>(), db_);
  EXPECT_EQ(j.at("outcome").at("ranks").get<int>(), 2);
  EXPECT_EQ(j.at("outcome").at("sizes").size(), 9u);  // 4 B .. 1 KiB

  // The database holds the plan and every measurement summary.
  auto db = tuner::db::TuningDb::open(db_, tuner::db::OpenMode::kReadOnly);
  ASSERT_TRUE(db.ok()) << db.error().message();
  auto plans = db->plans();
  ASSERT_TRUE(plans.ok());
  ASSERT_EQ(plans->size(), 1u);
  const auto& rec = plans->front();
  EXPECT_EQ(rec.key.shape.nodes, 1);
  EXPECT_EQ(rec.key.shape.ranks_per_node, 2);
  EXPECT_EQ(rec.key.recipe, "");
  auto plan = recipes::parse_plan(rec.plan_json);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->provenance.source, recipes::PlanSource::kTuned);
  const auto& ranges = plan->collectives.at(recipes::Collective::kAllreduce);
  ASSERT_FALSE(ranges.empty());
  EXPECT_EQ(ranges.front().min_bytes, 0u);
  EXPECT_EQ(ranges.back().max_bytes, recipes::kPlanMaxBytes);
  auto ms = db->measurements();
  ASSERT_TRUE(ms.ok());
  EXPECT_GE(ms->size(), 8u);
  std::set<std::string> algos;
  for (const auto& m : *ms) {
    EXPECT_EQ(m.collective, "allreduce");
    EXPECT_LE(m.bytes, 1024u);
    EXPECT_TRUE(m.key.same_identity(rec.key));
    if (!m.failed) {
      EXPECT_GT(m.median_us, 0);
      EXPECT_GT(m.samples, 0);
    }
    algos.insert(m.algorithm);
  }
  EXPECT_TRUE(algos.count("rd") && algos.count("ring") && algos.count("tree")) << ms->size();

  // Second run: a cache hit that says where from, without launching anything.
  CliRun second = dltune(common);
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.out.find("cached in " + db_), std::string::npos) << second.out;
  EXPECT_LT(second.seconds, first.seconds);
  CliRun second_json = dltune(common + " --json");
  ASSERT_EQ(second_json.code, 0) << second_json.err;
  EXPECT_TRUE(nlohmann::json::parse(second_json.out).at("cached").get<bool>());

  // --retune measures again (another job shape would not hit either).
  CliRun again = dltune("tune --collectives -n 2 --max-bytes 64 --db " + db_ +
                        " --retune --strategy exhaustive");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("runner-up"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("plan (stored in " + db_), std::string::npos) << again.out;
}

}  // namespace
}  // namespace dltune
