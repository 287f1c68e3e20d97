// The end-of-launch summary: the warnings a successful job must still show, the step-time
// split and the allreduce's lower bound.
#include "launcher/report/launch_outcome.h"

#include <gtest/gtest.h>

#include "launcher/flow/launch_job.h"

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
    facts.gradient_bytes = 1600000;
    facts.copy_gbs = 10;
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
  EXPECT_NE(w.find("lr x4.00 for global batch 512 the learning rate may be too high"),
            std::string::npos)
      << w;
  EXPECT_NE(format_summary(s).find("  warning            the model did not learn"),
            std::string::npos);
}

TEST(LaunchOutcome, ALearningOrShortRunHasNoWarning) {
  EXPECT_TRUE(FakeRun(300, 2.31, 0.05).summary()["warnings"].empty());
  // 96 % of the first loss would be "not learning", but 50 steps are too few to tell.
  EXPECT_TRUE(FakeRun(50, 2.31, 2.22).summary()["warnings"].empty());
  EXPECT_EQ(FakeRun(100, 2.31, 2.22).summary()["warnings"].size(), 1u);
}

// Issue 42: AlexNet's 40-step default run ended at 6.91 (ln 1000 = 6.908) with its lr scaled to
// x0.06, and no warning: too short for the "loss barely fell" rule, but at chance.
TEST(LaunchOutcome, ARunThatEndsAtChanceIsWarnedAboutEvenWhenShort) {
  FakeRun alexnet(40, 6.9310, 6.9102);
  alexnet.facts.classes = 1000;
  alexnet.facts.choice.plan.training.lr_scale = 0.0625;
  alexnet.facts.choice.plan.training.global_batch = 16;
  const auto s = alexnet.summary();
  ASSERT_EQ(s["warnings"].size(), 1u) << s.dump(1);
  const std::string w = s["warnings"][0];
  EXPECT_NE(w.find("the model did not learn: the loss went from 6.9310 to 6.9102, chance for "
                   "1000 classes is ln 1000 = 6.9078"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("lr x0.06 for global batch 16 the learning rate may be too low"),
            std::string::npos)
      << w;
  // Below chance, or too short to tell: no warning.
  FakeRun learning(40, 2.31, 1.20);
  learning.facts.classes = 10;
  EXPECT_TRUE(learning.summary()["warnings"].empty());
  FakeRun short_run(39, 6.93, 6.91);
  short_run.facts.classes = 1000;
  EXPECT_TRUE(short_run.summary()["warnings"].empty());
  // At chance, short, the lr not scaled down: the run may be too short.
  FakeRun plateau(40, 2.31, 2.30);
  plateau.facts.classes = 10;
  const std::string pw = plateau.summary()["warnings"][0];
  EXPECT_NE(pw.find("lr x4.00 for global batch 512, 40 steps may be too few to leave chance"),
            std::string::npos)
      << pw;
}

TEST(LaunchOutcome, TheBaselineIsOneRankOnOneNodeOfTheJob) {
  Job job;
  job.backend = Backend::kSlurm;
  job.ranks = 8;
  job.shape = {4, 2};
  job.recipe.launch.binding = "core";
  const Job one = baseline_job(job);
  EXPECT_EQ(one.ranks, 1);
  EXPECT_EQ(one.shape.nodes, 1);
  EXPECT_EQ(one.shape.ranks_per_node, 1);
  // `dltune run -n 1 --nodes 1 --backend slurm --bind core --`: not the job's 4 nodes, which
  // one rank cannot divide over (every multi-node launch lost its scaling efficiency so).
  const std::vector<std::string> want = {"dltune",    "run",   "-n",     "1",    "--nodes", "1",
                                         "--backend", "slurm", "--bind", "core", "--"};
  EXPECT_EQ(launch_prefix(one), want);
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
  run.facts.baseline_seconds = 1.9;
  run.facts.baseline_budget_s = 2;
  auto s = run.summary();
  EXPECT_EQ(s["baseline_1rank_steps"], 240);
  EXPECT_EQ(s["baseline_1rank"], "auto");
  EXPECT_DOUBLE_EQ(s["baseline_1rank_budget_s"].get<double>(), 2);
  EXPECT_EQ(s["baseline_1rank_bind"], "core");
  EXPECT_DOUBLE_EQ(s["baseline_1rank_rel_ci"].get<double>(), 0.021);
  EXPECT_TRUE(s["warnings"].empty());
  EXPECT_NE(format_summary(s).find("(1 rank: 520 samples/s +-2.1 %, 240 steps in 1.9 s, bound as "
                                   "the job's rank 0)"),
            std::string::npos)
      << format_summary(s);
  run.facts.baseline_rel_ci = 0.12;
  s = run.summary();
  ASSERT_EQ(s["warnings"].size(), 1u);
  EXPECT_NE(s["warnings"][0].get<std::string>().find("only known to +-12.0 % after 240 steps in "
                                                     "1.9 s (it may take about 10 % of the "
                                                     "training's time"),
            std::string::npos)
      << s["warnings"][0];
  EXPECT_NEAR(s["scaling_efficiency"].get<double>(), 1000.0 / (2 * 520), 1e-12);
}

// A baseline reused from the database says when and where it was measured instead of its length,
// and a superlinear efficiency then blames that earlier measurement, with the way to redo it.
TEST(LaunchOutcome, AReusedBaselineSaysWhenItWasMeasured) {
  FakeRun run(300, 2.31, 0.05);  // 2 ranks at 1000 samples/s
  run.facts.baseline_sps = 520;
  run.facts.baseline_steps = 240;
  run.facts.baseline_rel_ci = 0.021;
  run.facts.baseline_bind = "core";
  run.facts.baseline_measured_at = 1764518400;  // 2025-11-30T16:00:00Z
  run.facts.baseline_measured_on = "node07";
  auto s = run.summary();
  EXPECT_EQ(s["baseline_1rank_source"], "database");
  EXPECT_EQ(s["baseline_1rank_measured_at"], "2025-11-30T16:00:00Z");
  EXPECT_EQ(s["baseline_1rank_measured_on"], "node07");
  EXPECT_TRUE(s["warnings"].empty()) << s["warnings"];
  std::string text = format_summary(s, 400);
  EXPECT_NE(text.find("(1 rank: 520 samples/s +-2.1 %, from the database: measured "
                      "2025-11-30T16:00:00Z on node07 (launch.baseline=measure measures it "
                      "again), bound as the job's rank 0)"),
            std::string::npos)
      << text;
  run.facts.baseline_sps = 1000 / (2 * 1.18);
  s = run.summary();
  ASSERT_EQ(s["warnings"].size(), 1u) << s["warnings"];
  const std::string w = s["warnings"][0];
  EXPECT_NE(w.find("reused from the database (measured 2025-11-30T16:00:00Z), was slowed"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("--set launch.baseline=measure"), std::string::npos) << w;
  // One this launch measured says so.
  run.facts.baseline_measured_at = 0;
  EXPECT_EQ(run.summary()["baseline_1rank_source"], "measured");
}

// launch.baseline: off: no efficiency, and the summary says why rather than leaving it out.
TEST(LaunchOutcome, ABaselineTurnedOffIsSaid) {
  FakeRun run(300, 2.31, 0.05);
  run.facts.baseline_mode = "off";
  const auto s = run.summary();
  EXPECT_EQ(s["baseline_1rank"], "off");
  EXPECT_TRUE(s["scaling_efficiency"].is_null());
  EXPECT_NE(format_summary(s).find("  scaling efficiency not measured (launch.baseline: off)"),
            std::string::npos)
      << format_summary(s);
}

// Its bound: about 10 % of the training's time, at least 2 s, at most 40.
TEST(LaunchOutcome, TheBaselineTakesAboutATenthOfTheTraining) {
  EXPECT_DOUBLE_EQ(baseline_budget_s(100), 10);
  EXPECT_DOUBLE_EQ(baseline_budget_s(5), kBaselineMinBudgetS);
  EXPECT_DOUBLE_EQ(baseline_budget_s(3600), kBaselineMaxS);
  // Its first run: most of the budget, 40 steps where they fit it, else what fits (>= 8).
  EXPECT_EQ(baseline_first_steps(0.011, 4), 291);  // LeNet: 0.8 x 4 s / 11 ms, rounded up
  EXPECT_EQ(baseline_first_steps(0.13, 10), 62);
  EXPECT_EQ(baseline_first_steps(0.24, 10), 40);  // 34 would be 80 %; 40 still fit
  EXPECT_EQ(baseline_first_steps(0.5, 10), 20);   // 40 would be 20 s: as many as fit
  EXPECT_EQ(baseline_first_steps(2.37, 10), kBaselineFewestSteps);  // AlexNet: was 40, 75 s
  EXPECT_EQ(baseline_first_steps(0, 10), 160);                      // unknown: 50 ms assumed
}

// The run's length is not in the tuning key: a cached plan tuned for another length says so in
// the summary's plan row; one tuned for this length, or that does not say, says nothing.
TEST(LaunchOutcome, ACachedPlanOfAnotherLengthIsSaid) {
  FakeRun run(60, 2.31, 0.05);
  run.facts.choice.source = "cache";
  run.facts.choice.db_path = "/db.sqlite";
  run.facts.choice.plan.provenance.run_steps = 80;
  EXPECT_NE(format_summary(run.summary())
                .find("(no tuning; --retune measures again); tuned for a "
                      "run of 80 steps"),
            std::string::npos)
      << format_summary(run.summary());
  run.facts.choice.plan.provenance.run_steps = 60;
  EXPECT_EQ(format_summary(run.summary()).find("tuned for a run of"), std::string::npos);
  run.facts.choice.plan.provenance.run_steps = 0;
  EXPECT_EQ(format_summary(run.summary()).find("tuned for a run of"), std::string::npos);
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

// The memory line: the stage with the largest estimate (what decides whether the layout fits)
// beside its measured peak, and the largest error over the ranks; none without a report, and
// "not measured" when the worker could not measure.
TEST(LaunchOutcome, TheMemoryModelStandsBesideTheMeasuredPeak) {
  FakeRun run(100, 2.31, 0.05);
  EXPECT_TRUE(run.summary()["memory"].is_null());
  EXPECT_EQ(format_summary(run.summary()).find("memory  "), std::string::npos);
  run.facts.worker["memory"] = {{"ranks",
                                 {{{"rank", 0},
                                   {"stage", 0},
                                   {"estimate_bytes", 100 << 20},
                                   {"measured_bytes", 101 << 20},
                                   {"error", 0.0099}},
                                  {{"rank", 1},
                                   {"stage", 1},
                                   {"estimate_bytes", 120 << 20},
                                   {"measured_bytes", 126 << 20},
                                   {"error", 0.0476}}}},
                                {"max_error", 0.0476},
                                {"measured", "resident set peak"}};
  auto m = run.summary()["memory"];
  EXPECT_EQ(m["rank"], 1);
  EXPECT_EQ(m["stage"], 1);
  EXPECT_EQ(m["estimate_bytes"].get<double>(), 120 << 20);
  EXPECT_EQ(m["measured_bytes"].get<double>(), 126 << 20);
  EXPECT_NEAR(m["max_error"].get<double>(), 0.0476, 1e-12);
  std::string text = format_summary(run.summary());
  EXPECT_NE(text.find("memory             120 MiB per rank estimated (rank 1, stage 1), 126 MiB "
                      "measured"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("at most 4.8 % over the ranks measured"), std::string::npos) << text;
  for (auto& r : run.facts.worker["memory"]["ranks"]) r.erase("measured_bytes");
  run.facts.worker["memory"].erase("max_error");
  run.facts.worker["memory"].erase("measured");
  m = run.summary()["memory"];
  EXPECT_TRUE(m["measured_bytes"].is_null() && m["max_error"].is_null()) << m.dump();
  text = format_summary(run.summary());
  EXPECT_NE(text.find("(rank 1, stage 1); not measured"), std::string::npos) << text;
}

// The step-time split adds up, every part over the same timed steps: the step is the global
// batch over the throughput; what is neither compute nor exposed communication is "other";
// start-up, the first step, evaluations and checkpoints are reported once, never spread over
// the steps (a 12-step AlexNet run once showed "other 7296 ms" per step).
TEST(LaunchOutcome, TheStepTimeSplitAddsUp) {
  FakeRun run(100, 2.31, 0.05);
  run.facts.worker["global_batch"] = 15;  // 15 samples at 1000 samples/s: 15 ms per step
  // Seconds over the timed steps; `timed` of them (absent: all). Every case comes to
  // 10 + 2 + 3 = 15 ms per step, and `wall` holds 2 s beyond the timed steps.
  auto split_of = [&](double compute, double comm, double wall, int timed) {
    run.facts.worker["compute_s"] = compute;
    run.facts.worker["comm_s"] = comm;
    run.facts.worker["wall_seconds"] = wall;
    if (timed > 0) {
      run.facts.worker["steps_run"] = timed + 1;
      run.facts.worker["timed_steps"] = timed;
    }
    const auto st = run.summary()["step_time"];
    EXPECT_NEAR(st["compute_s"].get<double>(), 0.010, 1e-12);
    EXPECT_NEAR(st["exposed_comm_s"].get<double>(), 0.002, 1e-12);
    EXPECT_NEAR(st["other_s"].get<double>(), 0.003, 1e-12);
    EXPECT_NEAR(st["total_s"].get<double>(), 0.015, 1e-12);
    EXPECT_NEAR(st["outside_steps_s"].get<double>(), 2.0, 1e-9);
  };
  split_of(1.0, 0.2, 3.5, 0);
  const std::string text = format_summary(run.summary());
  EXPECT_NE(text.find("+ other 3.00 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("2.0 s once (start-up, the first step, evaluation, checkpoints)"),
            std::string::npos)
      << text;
  split_of(0.5, 0.1, 2.75, 50);     // resumed at step 50: this run executed 51 and timed 50
  split_of(0.12, 0.024, 2.18, 12);  // a short run: start-up stays out of the per-step figures
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
  EXPECT_NE(format_summary(run.summary()).find("none: one rank has nothing to reduce"),
            std::string::npos);
}

// The allreduce line is always there: with the sweep's estimate when the sweep reached the
// job's buckets, else saying why not (and a warning with what to do), and the bound or why
// it could not be computed; exposed communication beyond the allreduce is waiting for ranks.
TEST(LaunchOutcome, TheAllreduceLineIsAlwaysThereAndSaysWhy) {
  FakeRun run(300, 2.31, 0.05);
  run.facts.gradient_bytes = 1600000;
  run.facts.copy_gbs = 10;
  run.facts.choice.plan.training.bucket_bytes = 1 << 20;
  run.facts.worker["comm_s"] = 0.02 * 300;  // 20 ms exposed per step
  run.facts.worker["timed_steps"] = 300;
  auto s = run.summary();
  EXPECT_TRUE(s["allreduce"]["sweep_s_per_step"].is_null());
  EXPECT_NE(s["allreduce"]["sweep_note"].get<std::string>().find("no collective sweep"),
            std::string::npos);
  std::string text = format_summary(s);
  EXPECT_NE(text.find("not estimated (no collective sweep"), std::string::npos) << text;
  EXPECT_NE(text.find("bound 0.08 ms"), std::string::npos) << text;
  // The sweep measured only small sizes: said so, with a warning.
  tuner::db::Measurement m;
  m.collective = "allreduce";
  m.algorithm = "ring";
  m.bytes = 131072;
  m.median_us = 50;
  run.facts.choice.collective_measurements = {m};
  s = run.summary();
  EXPECT_NE(s["allreduce"]["sweep_note"].get<std::string>().find(
                "the sweep measured ring only up to 128 KiB, below this job's 1 MiB buckets"),
            std::string::npos)
      << s["allreduce"];
  bool warned = false;
  for (const auto& w : s["warnings"]) {
    warned = warned || w.get<std::string>().find("could not be estimated") != std::string::npos;
  }
  EXPECT_TRUE(warned) << s["warnings"];
  // It reached them: 1 MiB at 400 us and the 551,424-byte rest scaled from 1 MiB.
  m.bytes = 1 << 20;
  m.median_us = 400;
  run.facts.choice.collective_measurements = {m};
  s = run.summary();
  ASSERT_TRUE(s["allreduce"]["sweep_s_per_step"].is_number()) << s["allreduce"];
  EXPECT_NEAR(s["allreduce"]["sweep_s_per_step"].get<double>(), 400e-6 * (1 + 551424.0 / 1048576),
              1e-9);
  text = format_summary(s);
  EXPECT_NE(text.find("was waiting for the slowest rank"), std::string::npos) << text;
  EXPECT_EQ(s["allreduce"]["bound_note"], "");
  // A sweep estimate below the bound is not printed as if both held: the bound's bandwidth
  // was measured low, and the line says so.
  run.facts.copy_gbs = 1;  // bound 0.8 ms, above the 0.61 ms estimate
  s = run.summary();
  EXPECT_NE(s["allreduce"]["bound_note"].get<std::string>().find("below this bound"),
            std::string::npos)
      << s["allreduce"];
  EXPECT_NE(format_summary(s).find("GB/s; the sweep measured the allreduce below this bound"),
            std::string::npos)
      << format_summary(s);
  run.facts.copy_gbs = 0;
  s = run.summary();
  EXPECT_TRUE(s["allreduce"]["bound_s_per_step"].is_null());
  EXPECT_NE(format_summary(s).find("no bound (this machine's copy bandwidth"), std::string::npos);
}

// N ranks slower than one: a warning that says what to do.
TEST(LaunchOutcome, RanksSlowerThanOneAreWarnedAbout) {
  FakeRun run(300, 2.31, 0.05);
  run.facts.baseline_sps = 1200;  // 2 ranks at 1000 samples/s
  run.facts.baseline_rel_ci = 0.01;
  const auto s = run.summary();
  ASSERT_EQ(s["warnings"].size(), 1u) << s["warnings"];
  const std::string w = s["warnings"][0];
  EXPECT_NE(w.find("2 ranks trained at 1,000 samples/s, slower than 1 rank alone (1,200"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("Run with -n 1"), std::string::npos) << w;
}

// An efficiency no pair of ranks can reach says the baseline was slowed; at 1.1 and below
// (within the two figures' noise) nothing is said.
TEST(LaunchOutcome, SuperlinearEfficiencyIsWarnedAbout) {
  FakeRun run(300, 2.31, 0.05);  // 2 ranks at 1000 samples/s
  run.facts.baseline_rel_ci = 0.01;
  run.facts.baseline_sps = 1000 / (2 * 1.18);
  auto s = run.summary();
  ASSERT_EQ(s["warnings"].size(), 1u) << s["warnings"];
  const std::string w = s["warnings"][0];
  EXPECT_NE(w.find("the scaling efficiency is 118 %, above 100 %"), std::string::npos) << w;
  EXPECT_NE(w.find("rerun on an idle machine"), std::string::npos) << w;
  run.facts.baseline_sps = 1000 / (2 * 1.09);
  s = run.summary();
  EXPECT_TRUE(s["warnings"].empty()) << s["warnings"];
}

// A plan whose winner ran fewer trial steps than a step time needs to settle, or whose trials
// measured a throughput far from the training's, is said to be uncertain.
TEST(LaunchOutcome, ShortOrMisleadingTrialsAreWarnedAbout) {
  FakeRun run(300, 2.31, 0.05);
  run.facts.choice.source = "tuned";
  run.facts.choice.plan.provenance.measured_sps = 400;  // training ran at 1000
  run.facts.choice.recipe_outcome = {
      {"winner", 1},
      {"trials",
       {{"trials", {{{"candidate", 1}, {"steps", 4}}, {{"candidate", 0}, {"steps", 4}}}}}}};
  const auto s = run.summary();
  std::string all;
  for (const auto& w : s["warnings"]) all += w.get<std::string>() + "\n";
  EXPECT_NE(all.find("trials of only 4 steps of the winner"), std::string::npos) << all;
  EXPECT_NE(all.find("the trials measured 400 samples/s for this plan, training ran at 1,000"),
            std::string::npos)
      << all;
}

// Collective choices that the sweep's own measurements say an exhaustive search would beat by
// far are warned about; a good choice is not.
TEST(LaunchOutcome, UncertainCollectiveChoicesAreWarnedAbout) {
  FakeRun run(300, 2.31, 0.05);
  run.facts.gradient_bytes = 1 << 20;
  run.facts.choice.plan.training.bucket_bytes = 1 << 20;
  run.facts.choice.plan = recipes::default_plan(1, 2, 64, recipes::Algorithm::kRing);
  run.facts.choice.plan.training.bucket_bytes = 1 << 20;
  auto m = [](const char* algo, uint64_t bytes, double us) {
    tuner::db::Measurement x;
    x.collective = "allreduce";
    x.algorithm = algo;
    x.bytes = bytes;
    x.median_us = us;
    return x;
  };
  // ring (the plan's) takes 4x shm's time at the job's 1 MiB bucket.
  run.facts.choice.collective_measurements = {m("ring", 524288, 200), m("ring", 1 << 20, 400),
                                              m("shm", 524288, 50), m("shm", 1 << 20, 100)};
  auto warnings = [&] {
    std::string all;
    const nlohmann::json s = run.summary();  // kept alive over the loop
    for (const auto& w : s["warnings"]) all += w.get<std::string>() + "\n";
    return all;
  };
  EXPECT_NEAR(run.summary()["allreduce"]["collective_regret"].get<double>(), 3.0, 1e-9);
  EXPECT_NE(warnings().find("the collective choices are uncertain"), std::string::npos)
      << warnings();
  EXPECT_NE(warnings().find("allreduce 4.0x faster"), std::string::npos) << warnings();
  run.facts.choice.plan = recipes::default_plan(1, 2, 64, recipes::Algorithm::kShm);
  run.facts.choice.plan.training.bucket_bytes = 1 << 20;
  EXPECT_EQ(warnings().find("collective choices"), std::string::npos) << warnings();
}

// Unknown figures are null, not -1; a resumed run names its plan's origin, not an empty path.
TEST(LaunchOutcome, UnknownFiguresAreNullAndResumedRunsSayWhereTheirPlanIs) {
  FakeRun run(300, 2.31, 0.05);
  run.facts.worker.erase("heldout_accuracy");
  run.facts.choice.source = "cache";
  run.facts.resumed_from = "/tmp/run/checkpoints/checkpoint.bin";
  const auto s = run.summary();
  EXPECT_TRUE(s["heldout_accuracy"].is_null());
  EXPECT_TRUE(s["heldout_loss"].is_null());
  const std::string text = format_summary(s);
  EXPECT_NE(text.find("the run directory's plan.json (resumed; it was cache)"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("cached in  "), std::string::npos) << text;
  EXPECT_NE(text.find("not measured"), std::string::npos) << text;
}

// Each restart (launch.restarts) is in summary.json and is a row of the summary (and so of
// the report's summary table), in order.
TEST(LaunchOutcome, EachRestartIsReported) {
  FakeRun run(300, 2.31, 0.05);
  EXPECT_EQ(run.summary()["restarts"], nlohmann::json::array());
  Restart a;
  a.at_s = 12.34;
  a.exit_code = 137;
  a.why = "rank 1 on n0 was killed by signal 9 (SIGKILL)";
  a.from_step = 30;
  a.lost_s = 2.06;
  Restart b;
  b.at_s = 20;
  b.exit_code = 3;
  run.facts.restarts = {a, b};
  const auto s = run.summary();
  ASSERT_EQ(s["restarts"].size(), 2u) << s.dump(1);
  EXPECT_EQ(s["restarts"][0]["why"], a.why);
  const std::string text = format_summary(s, 200);
  const size_t first = text.find(
      "  restart 1          at 12.3 s: rank 1 on n0 was killed by "
      "signal 9 (SIGKILL); continued from the checkpoint at step 30");
  const size_t second = text.find(
      "  restart 2          at 20.0 s: the ranks failed with exit "
      "code 3; continued from the start (no checkpoint yet)");
  EXPECT_NE(first, std::string::npos) << text;
  EXPECT_NE(second, std::string::npos) << text;
  EXPECT_LT(first, second) << text;
}

// The summary wraps at the width asked for, between words, under its value column.
TEST(LaunchOutcome, WrappingKeepsWordsWhole) {
  EXPECT_EQ(wrap_words("one two three four", 9, 2), "one two\n  three\n  four");
  EXPECT_EQ(wrap_words("averyveryverylongword x", 5, 0), "averyveryverylongword\nx");
  FakeRun run(300, 2.31, 2.30);  // a warning long enough to wrap
  const std::string text = format_summary(run.summary(), 80);
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = text.substr(start, nl - start);
    EXPECT_LE(line.size(), 80u) << line;
  }
  EXPECT_NE(text.find("\n                     "), std::string::npos) << text;  // indented
  for (const char* word : {"learning", "warmup", "optimizer.lr_scaling:"}) {
    EXPECT_NE(text.find(word), std::string::npos) << word << " was broken: " << text;
  }
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
  EXPECT_NE(text.find("predicted          42,000 samples/s, step 12.00 ms = compute 10.00 ms"),
            std::string::npos)
      << text;
  // With an interval (issue 41): beside the figure, and what it covers on a row of its own.
  run.facts.prediction.job.throughput_range = {40000, 44000};
  run.facts.prediction.interval_note = "compute +-5.0 % (the range of 3 timed steps)";
  const auto si = run.summary();
  EXPECT_EQ(si["prediction"]["throughput_sps_range"], nlohmann::json({40000.0, 44000.0}));
  const std::string with = format_summary(si);
  EXPECT_NE(with.find("predicted          42,000 (40,000-44,000) samples/s, step 12.00 ms"),
            std::string::npos)
      << with;
  EXPECT_NE(with.find("    interval         compute +-5.0 % (the range of 3 timed steps)"),
            std::string::npos)
      << with;
}

// Issue 43, item 2: a plan that came unsigned from a bundle says so in summary.json and in the
// summary printed at the end; nothing a terminal would act on is printed (item 3).
TEST(LaunchOutcome, AnUnsignedCachedPlanSaysSo) {
  FakeRun run(100, 2.31, 0.05);
  run.facts.choice.source = "cache";
  run.facts.choice.db_path = "/site/x.db";
  run.facts.choice.signed_by = "unsigned";
  run.facts.choice.notes = {"warning: the plan cached in /site/x.db was imported unsigned"};
  const auto s = run.summary();
  EXPECT_EQ(s["database"]["signed_by"], "unsigned");
  EXPECT_EQ(s["notes"][0], "warning: the plan cached in /site/x.db was imported unsigned");
  std::string text = format_summary(s);
  EXPECT_NE(text.find("cached in /site/x.db (no tuning; --retune measures again); imported "
                      "unsigned: no trusted key vouches for it"),
            std::string::npos)
      << text;
  run.facts.choice.signed_by = "siteA";
  EXPECT_EQ(format_summary(run.summary()).find("unsigned"), std::string::npos);
  run.facts.choice.plan.provenance.reason = "ok \x1b]0;pwned\x07\x1b[31m";
  text = format_summary(run.summary());
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_NE(text.find("ok \\x1b]0;pwned\\x07\\x1b[31m"), std::string::npos) << text;
}

// Byte-level text: the progress line shows the loss in nats and the summary its bits per byte;
// the row labels both (issue 42: one unit, or both labelled).
TEST(LaunchOutcome, TheTextLossRowNamesBothUnits) {
  FakeRun run(300, 5.5, 1.3);
  run.facts.unigram_entropy_bits = 4.5;
  run.facts.worker["heldout_loss"] = 1.386;
  const std::string text = format_summary(run.summary());
  EXPECT_NE(text.find("held-out loss      1.3860 nats = 2.000 bits per byte (the file's unigram "
                      "entropy: 4.500 bits); final training loss 1.3000 nats"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace dltune::launcher
