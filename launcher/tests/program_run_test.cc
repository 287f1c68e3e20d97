// launcher/cli/program_run.h: the `dltune run` command a program recipe's run becomes, and how a
// run's end becomes a trial's result. (Runs of real programs: tests/launch/program_launch_test.sh.)
#include "launcher/cli/program_run.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dltune::cli {
namespace {

recipes::ProgramRecipe recipe() {
  recipes::ProgramRecipe r;
  r.name = "ddp";
  r.source_dir = "/srv/job";
  r.command = {"/usr/bin/python3", "train.py", "--batch-size", "{batch}", "--steps", "{steps}"};
  r.env = {{"MY_GLOBAL", "{global_batch}"}};
  r.throughput.pattern = "samples/s: ([0-9.]+)";
  r.search.batch = {32, 64};
  r.search.bucket_mb = {4};
  return r;
}

ProgramRun trial(const recipes::ProgramRecipe* r) {
  ProgramRun run;
  run.recipe = r;
  run.values.batch = 64;
  run.values.steps = 12;
  run.values.threads_per_rank = 1;
  run.values.ranks_per_node = 2;
  run.values.ranks = 2;
  run.values.bucket_mb = 4;
  run.binding = "core";
  run.out_dir = "/tmp/trial-3";
  run.timeout_s = 120;
  run.trial_steps = 12;
  run.trial_seconds = 7.5;
  return run;
}

// The value after `flag` in argv (before "--"), or "" when absent.
std::string after(const std::vector<std::string>& argv, const std::string& flag) {
  auto end = std::find(argv.begin(), argv.end(), "--");
  auto it = std::find(argv.begin(), end, flag);
  return it == end || it + 1 == end ? "" : *(it + 1);
}

bool exports(const std::vector<std::string>& argv, const std::string& assignment) {
  for (size_t i = 0; i + 1 < argv.size() && argv[i] != "--"; ++i) {
    if (argv[i] == "-x" && argv[i + 1] == assignment) return true;
  }
  return false;
}

TEST(ProgramRun, ATrialIsADltuneRunOfTheExpandedCommand) {
  const recipes::ProgramRecipe r = recipe();
  auto argv = program_run_argv(trial(&r));
  ASSERT_TRUE(argv.ok()) << argv.error().message();
  const std::vector<std::string>& a = *argv;
  EXPECT_NE(a[0].find("dltune"), std::string::npos);
  EXPECT_EQ(a[1], "run");
  EXPECT_EQ(after(a, "-n"), "2");
  EXPECT_EQ(after(a, "--backend"), "local");
  EXPECT_EQ(after(a, "--bind"), "core");
  EXPECT_EQ(after(a, "--timeout"), "120");
  EXPECT_EQ(after(a, "--output-filename"), "/tmp/trial-3/output:nocopy");  // a trial is quiet
  EXPECT_EQ(after(a, "--outcome-file"), "/tmp/trial-3/outcome.json");
  EXPECT_EQ(after(a, "--plan"), "");
  for (const char* v :
       {"OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "MKL_NUM_THREADS=1",
        "DLTUNE_METRICS=/tmp/trial-3/metrics.jsonl", "DLTUNE_TRIAL_STEPS=12",
        "DLTUNE_TRIAL_SECONDS=7.5", "MY_GLOBAL=128", "DLTUNE_BUCKET_MB=4", "DLTUNE_BATCH=64"}) {
    EXPECT_TRUE(exports(a, v)) << v;
  }
  const auto dashes = std::find(a.begin(), a.end(), "--");
  ASSERT_NE(dashes, a.end());
  EXPECT_EQ(std::vector<std::string>(dashes + 1, a.end()),
            (std::vector<std::string>{"/usr/bin/python3", "train.py", "--batch-size", "64",
                                      "--steps", "12"}));
}

// Over hosts and under Slurm (issue 39), the run spans the job's nodes; the user's -x come
// after the recipe's variables, so theirs win.
TEST(ProgramRun, OverHostsOrSlurmTheRunSpansTheNodes) {
  const recipes::ProgramRecipe r = recipe();
  ProgramRun run = trial(&r);
  run.values.ranks = 4;  // 2 per node
  run.hosts = {"n1", "n2"};
  run.run_options = {"-x", "MY_GLOBAL=7"};
  auto argv = program_run_argv(run);
  ASSERT_TRUE(argv.ok()) << argv.error().message();
  const std::vector<std::string>& a = *argv;
  EXPECT_EQ(after(a, "-n"), "4");
  EXPECT_EQ(after(a, "-H"), "n1:2,n2:2");
  EXPECT_EQ(std::find(a.begin(), a.end(), "--backend"), a.end());
  const auto recipe_x = std::find(a.begin(), a.end(), "MY_GLOBAL=256");  // 64 x 4 ranks
  const auto user_x = std::find(a.begin(), a.end(), "MY_GLOBAL=7");
  ASSERT_NE(recipe_x, a.end());
  ASSERT_NE(user_x, a.end());
  EXPECT_LT(recipe_x, user_x);
  EXPECT_LT(user_x, std::find(a.begin(), a.end(), "--"));
  run.hosts.clear();
  run.slurm_nodes = 2;
  auto slurm = program_run_argv(run);
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ(after(*slurm, "--backend"), "slurm");
  EXPECT_EQ(after(*slurm, "--nodes"), "2");
  EXPECT_EQ(std::find(slurm->begin(), slurm->end(), "-H"), slurm->end());
}

TEST(ProgramRun, TheFinalRunPassesItsOutputThroughWithThePlan) {
  const recipes::ProgramRecipe r = recipe();
  ProgramRun run = trial(&r);
  run.pass_through = true;
  run.tag_output = true;
  run.timestamp_output = true;
  run.timeout_s = 0;
  run.trial_steps = 0;
  run.trial_seconds = 0;
  run.plan_file = "/runs/ddp/plan.json";
  auto a = program_run_argv(run);
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_EQ(after(*a, "--output-filename"), "/tmp/trial-3/output");
  EXPECT_EQ(after(*a, "--plan"), "/runs/ddp/plan.json");
  EXPECT_EQ(after(*a, "--timeout"), "");
  const auto end = std::find(a->begin(), a->end(), "--");
  EXPECT_NE(std::find(a->begin(), end, "--tag-output"), end);
  EXPECT_NE(std::find(a->begin(), end, "--timestamp-output"), end);
  for (auto it = a->begin(); it != end; ++it) {
    EXPECT_EQ(it->rfind("DLTUNE_TRIAL_", 0), std::string::npos) << *it;
  }
}

TEST(ProgramRun, AnUnsetPlaceholderIsAnErrorNotACommand) {
  recipes::ProgramRecipe r = recipe();
  r.command.push_back("--bucket={bucket_mb}");
  ProgramRun run = trial(&r);
  run.values.bucket_mb = 0;  // not searched: the recipe may not name it
  auto a = program_run_argv(run);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message().find("bucket_mb"), std::string::npos) << a.error().message();
}

TEST(ProgramRun, ARunBecomesATrialResult) {
  ProgramRunResult ok;
  ok.samples_per_s = 812.5;
  ok.wall_s = 6.25;
  tuner::ProgramTrialResult t = trial_result(ok);
  EXPECT_FALSE(t.failed);
  EXPECT_DOUBLE_EQ(t.samples_per_s, 812.5);
  EXPECT_DOUBLE_EQ(t.wall_s, 6.25);

  ProgramRunResult crashed;
  crashed.exit_code = 3;
  crashed.message = "rank 1 on vm exited with code 3";
  crashed.output_tail = "[rank 1 stderr]\nRuntimeError: out of memory\n";
  t = trial_result(crashed);
  EXPECT_TRUE(t.failed);
  EXPECT_EQ(t.reason, crashed.message);
  EXPECT_EQ(t.output_tail, crashed.output_tail);

  ProgramRunResult silent;
  silent.throughput_error = "printed no line matching 'samples/s: ([0-9.]+)'";
  silent.output_tail = "[rank 0 stdout]\nstep 12\n";
  t = trial_result(silent);
  EXPECT_TRUE(t.failed);
  EXPECT_EQ(t.reason, silent.throughput_error);

  ProgramRunResult late;
  late.exit_code = 1;
  late.wall_s = 4.2;
  late.message = "the job did not finish within 4 s (--timeout): rank 0 on vm was still running";
  t = trial_result(late, 4);
  EXPECT_TRUE(t.failed);
  EXPECT_EQ(t.reason.rfind("ran past program.trial_timeout (4 s): the job did not finish", 0), 0u)
      << t.reason;
  EXPECT_EQ(trial_result(crashed, 4).reason, crashed.message);  // it failed before the limit

  ProgramRunResult no_message;
  no_message.exit_code = 137;
  EXPECT_EQ(trial_result(no_message).reason, "exited with code 137");
}

TEST(ProgramRun, LastLinesKeepsTheEndPrintableAndShort) {
  EXPECT_EQ(last_lines("a\nb\nc\nd\n\n\n", 2), "c\nd\n");
  EXPECT_EQ(last_lines("only", 5), "only\n");
  EXPECT_EQ(last_lines("", 3), "");
  const std::string shown = last_lines(std::string(500, 'x') + "\n", 1);
  EXPECT_EQ(shown.size(), 201u);  // 197 + "..." + newline
  EXPECT_EQ(shown.substr(197, 3), "...");
  EXPECT_EQ(last_lines(std::string("bell\a\x1b[31mred\n"), 1).find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace dltune::cli
