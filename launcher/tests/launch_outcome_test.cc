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

}  // namespace
}  // namespace dltune::launcher
