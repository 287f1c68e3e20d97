// The end-of-launch summary: the warnings a successful job must still show, the step-time
// split and the allreduce's lower bound.
#include "launcher/launch_outcome.h"

#include <gtest/gtest.h>

namespace dltune::launcher {
namespace {

// A run of `steps` steps whose logged loss goes from `first` to `last`.
struct FakeRun {
  RunFacts facts;
  MetricsLog log;
  RunDir dir{"/tmp/run"};
  FakeRun(int64_t steps, double first, double last) {
    facts.recipe = "r";
    facts.ranks = 2;
    facts.choice.plan.training.lr_scale = 4;
    facts.choice.plan.training.global_batch = 512;
    facts.worker = {{"steps", steps},
                    {"final_loss", last},
                    {"heldout_accuracy", 0.107},
                    {"throughput_sps", 1000.0}};
    log.steps.push_back({{"step", 0}, {"loss", first}});
    log.steps.push_back({{"step", steps - 1}, {"loss", last}});
  }
  nlohmann::json summary() const { return make_summary(facts, log, dir); }
};

TEST(LaunchOutcome, AModelThatDidNotLearnIsWarnedAbout) {
  const FakeRun stuck(300, 2.3092, 2.3034);  // LeNet at 4x its learning rate: dead at chance
  const auto s = stuck.summary();
  ASSERT_EQ(s["warnings"].size(), 1u) << s.dump(1);
  const std::string w = s["warnings"][0];
  EXPECT_NE(w.find("the model did not learn: the loss went from 2.3092 to 2.3034"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("held-out accuracy 10.7 %"), std::string::npos) << w;
  EXPECT_NE(w.find("lr x4.00 for global batch 512"), std::string::npos) << w;
  EXPECT_NE(format_summary(s).find("  warning            the model did not learn"),
            std::string::npos);
}

TEST(LaunchOutcome, ALearningOrShortRunHasNoWarning) {
  EXPECT_TRUE(FakeRun(300, 2.31, 0.05).summary()["warnings"].empty());
  // 96 % of the first loss would be "not learning", but 50 steps are too few to tell.
  EXPECT_TRUE(FakeRun(50, 2.31, 2.22).summary()["warnings"].empty());
  EXPECT_EQ(FakeRun(100, 2.31, 2.22).summary()["warnings"].size(), 1u);
}

TEST(LaunchOutcome, AFailedBaselineIsSaidNotLeftOut) {
  FakeRun ok(300, 2.31, 0.05);
  ok.facts.baseline_error = "the 1-rank run exited with code 2";
  const auto s = ok.summary();
  EXPECT_TRUE(s["scaling_efficiency"].is_null());
  ASSERT_EQ(s["warnings"].size(), 1u);
  EXPECT_EQ(s["warnings"][0], "scaling efficiency not measured: the 1-rank run exited with code 2");
  ok.facts.baseline_error.clear();
  ok.facts.baseline_sps = 600;
  const auto m = ok.summary();
  EXPECT_TRUE(m["warnings"].empty());
  EXPECT_NEAR(m["scaling_efficiency"].get<double>(), 1000.0 / (2 * 600), 1e-12);
}

// The baseline says how long it ran, how it was bound and how well its mean is known; an
// interval wider than launch_job.h's kBaselineRelCi is a warning, not a silent figure.
TEST(LaunchOutcome, TheBaselineReportsItsLengthBindingAndInterval) {
  FakeRun run(300, 2.31, 0.05);
  run.facts.baseline_sps = 520;
  run.facts.baseline_steps = 240;
  run.facts.baseline_rel_ci = 0.021;
  run.facts.baseline_bind = "core";
  auto s = run.summary();
  EXPECT_EQ(s["baseline_1rank_steps"], 240);
  EXPECT_EQ(s["baseline_1rank_bind"], "core");
  EXPECT_DOUBLE_EQ(s["baseline_1rank_rel_ci"].get<double>(), 0.021);
  EXPECT_TRUE(s["warnings"].empty());
  EXPECT_NE(format_summary(s).find("(1 rank: 520 samples/s +-2.1 %, 240 steps bound as the job's "
                                   "rank 0)"),
            std::string::npos)
      << format_summary(s);
  run.facts.baseline_rel_ci = 0.12;
  s = run.summary();
  ASSERT_EQ(s["warnings"].size(), 1u);
  EXPECT_NE(s["warnings"][0].get<std::string>().find("only known to +-12.0 % after 240 steps"),
            std::string::npos)
      << s["warnings"][0];
  EXPECT_NEAR(s["scaling_efficiency"].get<double>(), 1000.0 / (2 * 520), 1e-12);
}

// More ranks per node than cores: the ranks time-shared cores, which the summary says (mpirun
// would have refused to start them without --oversubscribe).
TEST(LaunchOutcome, RanksSharingCoresAreSaid) {
  FakeRun run(300, 2.31, 0.05);
  run.facts.ranks = 4;
  run.facts.nodes = 1;
  run.facts.cores_per_node = 2;
  run.facts.binding = "core";
  auto s = run.summary();
  EXPECT_TRUE(s["ranks_shared_cores"].get<bool>());
  ASSERT_EQ(s["warnings"].size(), 1u) << s.dump(1);
  const std::string w = s["warnings"][0];
  EXPECT_NE(w.find("4 ranks per node shared 2 cores (binding: core)"), std::string::npos) << w;
  EXPECT_NE(format_summary(s).find("warning            4 ranks per node shared 2 cores"),
            std::string::npos);
  run.facts.nodes = 2;  // 2 per node on 2 cores each
  s = run.summary();
  EXPECT_FALSE(s["ranks_shared_cores"].get<bool>());
  EXPECT_TRUE(s["warnings"].empty()) << s.dump(1);
}

// The step-time split adds up: what is neither compute nor exposed communication is "other".
TEST(LaunchOutcome, TheStepTimeSplitAddsUp) {
  FakeRun run(100, 2.31, 0.05);
  // Seconds over the run's steps; `counted` says which steps the worker executed and timed
  // (absent: all of them). Every case comes to 10 + 2 + 3 = 15 ms per step.
  auto split_of = [&](double compute, double comm, double wall, int counted) {
    run.facts.worker["compute_s"] = compute;
    run.facts.worker["comm_s"] = comm;
    run.facts.worker["wall_seconds"] = wall;
    if (counted > 0) {
      run.facts.worker["steps_run"] = counted;
      run.facts.worker["timed_steps"] = counted;
    }
    const auto st = run.summary()["step_time"];
    EXPECT_NEAR(st["compute_s"].get<double>(), 0.010, 1e-12);
    EXPECT_NEAR(st["exposed_comm_s"].get<double>(), 0.002, 1e-12);
    EXPECT_NEAR(st["other_s"].get<double>(), 0.003, 1e-12);
    EXPECT_NEAR(st["total_s"].get<double>(), 0.015, 1e-12);
  };
  split_of(1.0, 0.2, 1.5, 0);
  EXPECT_NE(format_summary(run.summary()).find("+ other 3.00 ms"), std::string::npos);
  split_of(0.5, 0.1, 0.75, 50);  // resumed at step 50: this run executed and timed 50 steps
}

// Each rank brings in (p-1)/p of the gradient and sends as much out: 2 (p-1)/p N bytes across
// its core, which a copy at G GB/s moves in (p-1)/p N / G seconds (a copy reads and writes).
TEST(LaunchOutcome, TheAllreduceBoundIsTheTrafficAcrossEachCore) {
  FakeRun run(300, 2.31, 0.05);
  run.facts.gradient_bytes = 1'000'000'000;
  run.facts.copy_gbs = 10;
  EXPECT_NEAR(run.summary()["allreduce"]["bound_s_per_step"].get<double>(), 0.05, 1e-12);
  run.facts.ranks = 4;
  EXPECT_NEAR(run.summary()["allreduce"]["bound_s_per_step"].get<double>(), 0.075, 1e-12);
  run.facts.ranks = 1;  // nothing to reduce
  EXPECT_EQ(run.summary()["allreduce"]["bound_s_per_step"].get<double>(), 0.0);
}

// Across nodes the network is a level of its own: each node sends and receives 2 (N-1)/N of
// the gradient through its links at the bandwidth the inter-node fit measured (G ranks over one
// rank's beta), and the bound is the slower level's.
TEST(LaunchOutcome, TheAllreduceBoundAcrossNodesIsTheSlowerLevel) {
  FakeRun run(300, 2.31, 0.05);
  run.facts.gradient_bytes = 1'000'000'000;
  run.facts.copy_gbs = 10;
  run.facts.ranks = 4;
  run.facts.nodes = 2;
  // No network fit: only the memory level is known, (2-1)/2 N at 10 GB/s.
  auto ar = run.summary()["allreduce"];
  EXPECT_NEAR(ar["bound_s_per_step"].get<double>(), 0.05, 1e-12);
  EXPECT_TRUE(ar["bound_levels"]["network_s"].is_null());
  // 2 ranks per node each at 0.5 GB/s: 1 GB/s a node; 2 (2-1)/2 N / 1 GB/s = 1 s.
  predict::LevelFit inter;
  inter.level = "inter";
  inter.nodes = 2;
  inter.ranks_per_node = 2;
  inter.link = {1e-5, 1 / 0.5e9, 0};
  run.facts.choice.level_fits = {inter};
  ar = run.summary()["allreduce"];
  EXPECT_NEAR(ar["bound_levels"]["network_s"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(ar["bound_levels"]["network_node_gbps"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(ar["bound_levels"]["memory_s"].get<double>(), 0.05, 1e-12);
  EXPECT_NEAR(ar["bound_s_per_step"].get<double>(), 1.0, 1e-9);
  EXPECT_NE(format_summary(run.summary()).find("network 1000.00 ms at 1.00 GB/s a node"),
            std::string::npos);
  // An intra-node fit is not a network: one node's bound stays the memory level's.
  run.facts.nodes = 1;
  EXPECT_NEAR(run.summary()["allreduce"]["bound_s_per_step"].get<double>(), 0.075, 1e-12);
}

// The models' prediction made before the run is set beside what the run measured.
TEST(LaunchOutcome, ThePredictionStandsBesideTheMeasurement) {
  FakeRun run(100, 2.31, 0.05);
  EXPECT_TRUE(run.summary()["prediction"].contains("error"));
  run.facts.prediction.ok = true;
  run.facts.prediction.job.step_s = 0.012;
  run.facts.prediction.job.compute_s = 0.010;
  run.facts.prediction.job.exposed_comm_s = 0.002;
  run.facts.prediction.job.throughput_sps = 42000;
  run.facts.prediction.job.algorithm = "hier";
  const auto s = run.summary();
  EXPECT_NEAR(s["prediction"]["step_ms"].get<double>(), 12.0, 1e-9);
  EXPECT_EQ(s["prediction"]["algorithm"], "hier");
  const std::string text = format_summary(s);
  EXPECT_NE(text.find("predicted          42000 samples/s, step 12.00 ms = compute 10.00 ms"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace dltune::launcher
