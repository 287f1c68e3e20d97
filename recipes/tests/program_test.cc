// Program recipes (recipes/program.h): what parses and to what, every kind of problem located,
// the placeholders, the command and environment of a run, the signature, the YAML view's round
// trip and telling a program recipe from a model recipe.
#include "recipes/program.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/paths.h"

#include "dltune/config.h"

namespace dltune::recipes {
namespace {

namespace fs = std::filesystem;

std::string all_problems(const ProgramParseOutcome& o) {
  std::string out;
  for (const Problem& p : o.problems) out += p.to_string() + "\n";
  return out;
}

ProgramParseOutcome parse(const std::string& text) {
  return parse_program_recipe(text, "p.yaml", "/tmp");
}

// "line:col key" of every problem, in order.
std::vector<std::string> where(const ProgramParseOutcome& o) {
  std::vector<std::string> out;
  for (const Problem& p : o.problems)
    out.push_back(std::to_string(p.line) + ":" + std::to_string(p.column) + " " + p.key);
  return out;
}

// The one problem of `text`, which must have exactly one.
Problem only_problem(const std::string& text) {
  const ProgramParseOutcome o = parse(text);
  EXPECT_EQ(o.problems.size(), 1u) << text << "\n" << all_problems(o);
  return o.problems.empty() ? Problem{} : o.problems.front();
}

const char* const kFull = R"(name: my-ddp
description: data parallel, tuned
program:
  command: [python3, train.py, --batch-size, "{batch}", --steps, "{steps}", --seed, 7]
  env: {MY_BUCKET: "{bucket_mb}", WORKERS: 2}
  throughput: {pattern: 'samples/s: ([0-9.]+)'}
  steps: 200
  trial_steps: 10
  trial_timeout: 60.5
tune:
  budget: 300
  screening: off
  search:
    batch: [32, 64, 128]
    threads_per_rank: auto
    ranks_per_node: [1, 2]
    bucket_mb: [0.5, 4, 25]
launch: {threads_per_rank: auto, binding: core, restarts: 2}
)";

TEST(ProgramParse, FullRecipe) {
  const ProgramParseOutcome o = parse(kFull);
  ASSERT_TRUE(o.ok()) << all_problems(o);
  const ProgramRecipe& r = o.recipe;
  EXPECT_EQ(r.name, "my-ddp");
  EXPECT_EQ(r.description, "data parallel, tuned");
  EXPECT_EQ(r.source_path, "p.yaml");
  EXPECT_EQ(r.source_dir, "/tmp");
  EXPECT_EQ(r.command, (std::vector<std::string>{"python3", "train.py", "--batch-size", "{batch}",
                                                 "--steps", "{steps}", "--seed", "7"}));
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(r.env, (Env{{"MY_BUCKET", "{bucket_mb}"}, {"WORKERS", "2"}}));
  EXPECT_EQ(r.throughput.pattern, "samples/s: ([0-9.]+)");
  EXPECT_EQ(r.throughput.metrics_key, "");
  EXPECT_EQ(r.steps, 200);
  EXPECT_EQ(r.trial_steps, 10);
  EXPECT_DOUBLE_EQ(r.trial_timeout_s, 60.5);
  EXPECT_DOUBLE_EQ(r.budget_seconds, 300);
  EXPECT_EQ(r.screening, "off");
  EXPECT_EQ(r.search.batch, (std::vector<int64_t>{32, 64, 128}));
  EXPECT_TRUE(r.search.threads_auto);
  EXPECT_TRUE(r.search.threads_per_rank.empty());
  EXPECT_FALSE(r.search.ranks_auto);
  EXPECT_EQ(r.search.ranks_per_node, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r.search.bucket_mb, (std::vector<double>{0.5, 4, 25}));
  EXPECT_EQ(r.launch.ranks, 0);
  EXPECT_EQ(r.launch.threads_per_rank, 0);
  EXPECT_EQ(r.launch.binding, "core");
  EXPECT_EQ(r.launch.restarts, 2);
}

TEST(ProgramParse, MinimalRecipeGetsTheDefaults) {
  const ProgramParseOutcome o =
      parse_program_recipe("program: {command: [./run.sh], throughput: {metrics: samples_per_s}}\n",
                           "dir/mine.yaml", "relative/dir");
  ASSERT_TRUE(o.ok()) << all_problems(o);
  const ProgramRecipe& r = o.recipe;
  EXPECT_EQ(r.name, "mine");  // the file's stem
  EXPECT_EQ(r.description, "");
  EXPECT_EQ(r.source_dir, (fs::current_path() / "relative/dir").string());  // made absolute
  EXPECT_EQ(r.throughput.metrics_key, "samples_per_s");
  EXPECT_TRUE(r.env.empty());
  EXPECT_EQ(r.steps, kProgramDefaultSteps);
  EXPECT_EQ(r.trial_steps, kProgramDefaultTrialSteps);
  EXPECT_DOUBLE_EQ(r.trial_timeout_s, kProgramDefaultTrialTimeoutS);
  EXPECT_DOUBLE_EQ(r.budget_seconds, kProgramDefaultBudgetS);
  EXPECT_EQ(r.screening, "auto");
  EXPECT_TRUE(r.search.batch.empty());
  EXPECT_FALSE(r.search.threads_auto);
  EXPECT_FALSE(r.search.ranks_auto);
  EXPECT_EQ(r.launch.ranks, 0);
  EXPECT_EQ(r.launch.ranks_per_node, 0);
  EXPECT_EQ(r.launch.binding, "auto");
  EXPECT_EQ(r.launch.restarts, 0);
}

// Several mistakes in one file: each reported at its own line and column, in file order.
TEST(ProgramParse, EveryProblemAtOnceLocated) {
  const ProgramParseOutcome o = parse(R"(name: bad
model: lenet
program:
  commnd: [x]
  env: {RANK: "1", 9X: a, DLTUNE_FOO: b}
  throughput: {pattern: 'no group'}
  steps: 0
  trial_timeout: 90000
tune:
  budget: -1
  search:
    batch: [32, 32]
    bucket_mb: [0, 5000, "4"]
    threads_per_rank: []
launch: {binding: sometimes, memory_per_rank: 1GiB}
)");
  EXPECT_EQ(where(o),
            (std::vector<std::string>{
                "2:1 model", "3:1 program.command", "4:3 program.commnd", "5:9 program.env.RANK",
                "5:20 program.env.9X", "5:27 program.env.DLTUNE_FOO",
                "6:25 program.throughput.pattern", "7:10 program.steps",
                "8:18 program.trial_timeout", "10:11 tune.budget", "12:17 tune.search.batch[1]",
                "13:17 tune.search.bucket_mb[0]", "13:20 tune.search.bucket_mb[1]",
                "13:26 tune.search.bucket_mb[2]", "14:23 tune.search.threads_per_rank",
                "15:19 launch.binding", "15:30 launch.memory_per_rank"}))
      << all_problems(o);
  ASSERT_EQ(o.problems.size(), 17u);
  const auto message = [&](size_t i) { return o.problems[i].message; };
  EXPECT_NE(message(0).find("program recipes do not take 'model'"), std::string::npos);
  EXPECT_NE(message(1).find("missing 'command'"), std::string::npos);
  EXPECT_NE(message(2).find("did you mean 'command'"), std::string::npos);
  EXPECT_NE(message(3).find("dltune sets RANK"), std::string::npos);
  EXPECT_NE(message(4).find("not a variable name"), std::string::npos);
  EXPECT_NE(message(5).find("DLTUNE_ variables are dltune's own"), std::string::npos);
  EXPECT_NE(message(6).find("no capture group"), std::string::npos);
  EXPECT_NE(message(10).find("repeats 32"), std::string::npos);
  EXPECT_NE(message(12).find("got 5000"), std::string::npos);
  EXPECT_NE(message(13).find("write numbers without quotes"), std::string::npos);
  EXPECT_NE(message(14).find("an empty list"), std::string::npos);
  EXPECT_NE(message(16).find("only model recipes take 'memory_per_rank'"), std::string::npos);
  EXPECT_EQ(o.problems[0].to_string(),
            "p.yaml:2:1: model: program recipes do not take 'model': the program builds its own");
}

TEST(ProgramParse, ModelSectionsAreRefused) {
  const ProgramParseOutcome o = parse(
      "data: mnist\ntraining: {steps: 3}\ncomm: {backend: mpi}\n"
      "program: {command: [a], throughput: {metrics: k}}\n");
  EXPECT_EQ(where(o), (std::vector<std::string>{"1:1 data", "2:1 training", "3:1 comm"}));
  for (const Problem& p : o.problems)
    EXPECT_NE(p.message.find("program recipes do not take '" + p.key + "'"), std::string::npos);
}

TEST(ProgramParse, ProgramSectionProblems) {
  const std::string tail = "  throughput: {metrics: k}\n";
  struct Case {
    std::string text;
    std::string key;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"program:\n  command: python3 train.py\n" + tail, "program.command",
            "expected a non-empty list"},
           {"program:\n  command: []\n" + tail, "program.command", "got an empty list"},
           {"program:\n  command: ['', x]\n" + tail, "program.command[0]", "empty"},
           {"program:\n  command: [a, [b]]\n" + tail, "program.command[1]", "expected a string"},
           {"program:\n  command: [a]\n  env: [A]\n" + tail, "program.env", "expected a mapping"},
           {"program:\n  command: [a]\n  env: {A: [1]}\n" + tail, "program.env.A",
            "expected a string or a number"},
           {"program:\n  command: [a]\n  env: {OMP_NUM_THREADS: 4}\n" + tail,
            "program.env.OMP_NUM_THREADS", "dltune sets OMP_NUM_THREADS"},
           {"program:\n  command: [a]\n  env: {MASTER_PORT: 4}\n" + tail, "program.env.MASTER_PORT",
            "dltune sets"},
           {"program:\n  command: [a]\n  env: {A-B: 4}\n" + tail, "program.env.A-B",
            "not a variable name"},
           {"program:\n  command: [a]\n  env: {A: 1, A: 2}\n" + tail, "program.env.A", "duplicate"},
           {"program:\n  command: [a]\n", "program.throughput", "missing 'throughput'"},
           {"program:\n  command: [a]\n  throughput: {}\n", "program.throughput", "give pattern"},
           {"program:\n  command: [a]\n  throughput: {pattern: '(x)', metrics: k}\n",
            "program.throughput.metrics", "not both"},
           {"program:\n  command: [a]\n  throughput: {pattern: '([0-9'}\n",
            "program.throughput.pattern", "not a valid regular expression"},
           {"program:\n  command: [a]\n  throughput: {metrics: ''}\n", "program.throughput.metrics",
            "an empty key"},
           {"program:\n  command: [a]\n  throughput: {metric: k}\n", "program.throughput.metric",
            "did you mean 'metrics'"},
           {"program:\n  command: [a]\n  trial_steps: 1000000001\n" + tail, "program.trial_steps",
            "at most 1000000000"},
           {"program:\n  command: [a]\n  trial_timeout: 0\n" + tail, "program.trial_timeout",
            "(0, 86400]"},
           {"name: a/b\nprogram:\n  command: [a]\n" + tail, "name", "may only use letters"},
           {"tune: {budget: 5}\n", "program", "missing required section 'program'"},
           {"program:\n  command: [a]\n" + tail + "tune: {budget: 1000001}\n", "tune.budget",
            "[0, 1e+06]"},
           {"program:\n  command: [a]\n" + tail + "tune: {screening: on}\n", "tune.screening",
            "auto"},
           {"program:\n  command: [a]\n" + tail + "tune: {objective: throughput}\n",
            "tune.objective", "unknown key"},
           {"program:\n  command: [a]\n" + tail + "launch: {restarts: 101}\n", "launch.restarts",
            "at most 100"},
           {"program:\n  command: [a]\n" + tail + "launch: {ranks: 0}\n", "launch.ranks",
            "positive integer or 'auto'"},
           {"program:\n  command: [a]\n" + tail + "launch: {baseline: off}\n", "launch.baseline",
            "only model recipes"},
       }) {
    SCOPED_TRACE(c.text);
    const Problem p = only_problem(c.text);
    EXPECT_EQ(p.key, c.key) << p.to_string();
    EXPECT_NE(p.message.find(c.says), std::string::npos) << p.to_string();
    EXPECT_GT(p.line, 0) << p.to_string();
  }
}

TEST(ProgramParse, SearchProblems) {
  const std::string head = "program: {command: [a], throughput: {metrics: k}}\n";
  struct Case {
    std::string text;
    std::string key;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"tune: {search: {batch: auto}}\n", "tune.search.batch", "expected a list"},
           {"tune: {search: {batch: [0]}}\n", "tune.search.batch[0]", "positive integer"},
           {"tune: {search: {threads_per_rank: [1, auto]}}\n", "tune.search.threads_per_rank[1]",
            "'auto' stands alone"},
           {"tune: {search: {ranks_per_node: [4097]}}\n", "tune.search.ranks_per_node[0]",
            "at most 4096"},
           {"tune: {search: {ranks_per_node: 2}}\n", "tune.search.ranks_per_node",
            "or 'auto', got 2"},
           {"tune: {search: {bucket_mb: [1, 1.0]}}\n", "tune.search.bucket_mb[1]", "repeats 1.0"},
           {"tune: {search: {bucket_mb: [-1]}}\n", "tune.search.bucket_mb[0]", "(0, 4096]"},
           {"tune: {search: {ranks_per_node: auto}}\nlaunch: {ranks: 8}\n",
            "tune.search.ranks_per_node", "launch.ranks is 8"},
           {"tune: {search: {ranks_per_node: [1, 2]}}\nlaunch: {ranks_per_node: 2}\n",
            "tune.search.ranks_per_node", "launch.ranks_per_node is 2"},
           {"tune: {search: {threads_per_rank: [1, 2]}}\nlaunch: {threads_per_rank: 4}\n",
            "tune.search.threads_per_rank", "launch.threads_per_rank is 4"},
           {"launch: {ranks: 6, ranks_per_node: 4}\n", "launch.ranks_per_node",
            "does not fill whole nodes"},
           {"tune:\n  search:\n    batch: [1, 2, 3, 4, 5, 6, 7, 8]\n    threads_per_rank: [1, 2, "
            "4, 8]\n    bucket_mb: [1, 2, 4, 8, 16, 32, 64, 128, 256]\n",
            "tune.search", "288 combinations (batch 8 x threads_per_rank 4 x bucket_mb 9)"},
       }) {
    SCOPED_TRACE(c.text);
    const Problem p = only_problem(head + c.text);
    EXPECT_EQ(p.key, c.key) << p.to_string();
    EXPECT_NE(p.message.find(c.says), std::string::npos) << p.to_string();
    EXPECT_GT(p.line, 1) << p.to_string();
  }
  // 256 combinations exactly, auto counted once: fine.
  EXPECT_TRUE(parse(head +
                    "tune:\n  search:\n    batch: [1, 2, 3, 4, 5, 6, 7, 8]\n    ranks_per_node: "
                    "auto\n    bucket_mb: [1, 2, 4, 8, 16, 32, 64, 128]\n    threads_per_rank: "
                    "[1, 2, 3, 4]\n")
                  .ok());
}

TEST(ProgramParse, PlaceholdersAreKnownAndSet) {
  const std::string tail = "  throughput: {metrics: k}\n";
  struct Case {
    std::string text;
    std::string where;  // "line:col key"
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"program:\n  command: [a, \"{bach}\"]\n" + tail, "2:16 program.command[1]",
            "unknown placeholder {bach} (did you mean '{batch}'?)"},
           {"program:\n  command: [a, \"{batch}\"]\n" + tail, "2:16 program.command[1]",
            "{batch} has no value: list the per-rank batches to try in tune.search.batch"},
           {"program:\n  command: [a, \"--gb={global_batch}\"]\n" + tail, "2:16 program.command[1]",
            "{global_batch} has no value: list the per-rank batches"},
           {"program:\n  command: [a]\n  env: {B: \"{bucket_mb}\"}\n" + tail, "3:12 program.env.B",
            "tune.search.bucket_mb"},
           {"program:\n  command: [a]\n  env: {B: \"{steps\"}\n" + tail, "3:12 program.env.B",
            "unmatched '{' at character 1"},
           {"program:\n  command: [a, \"x}\"]\n" + tail, "2:16 program.command[1]",
            "unmatched '}' at character 2"},
       }) {
    SCOPED_TRACE(c.text);
    const ProgramParseOutcome o = parse(c.text);
    ASSERT_EQ(o.problems.size(), 1u) << all_problems(o);
    EXPECT_EQ(where(o)[0], c.where);
    EXPECT_NE(o.problems[0].message.find(c.says), std::string::npos) << all_problems(o);
  }
  // The ones always set, the searched ones, and escaped braces.
  EXPECT_TRUE(parse("program:\n  command: [a, '{threads}', '{ranks}', '{ranks_per_node}', "
                    "'{steps}', '{batch}', '{global_batch}', '{bucket_mb}', '{{x}}']\n" +
                    tail + "tune: {search: {batch: [8], bucket_mb: [2]}}\n")
                  .ok());
  // A search list that is wrong is one problem, not a second about the placeholder it sets.
  const ProgramParseOutcome o =
      parse("program:\n  command: [a, '{batch}']\n" + tail + "tune: {search: {batch: [0]}}\n");
  EXPECT_EQ(where(o), (std::vector<std::string>{"4:25 tune.search.batch[0]"}));
}

TEST(ProgramParse, SyntaxAndEmpty) {
  const Problem syntax = only_problem("program: [a\n");
  EXPECT_EQ(syntax.key, "syntax");
  EXPECT_GT(syntax.line, 0);
  const Problem empty = only_problem("");
  EXPECT_EQ(empty.key, "recipe");
  EXPECT_NE(empty.message.find("empty"), std::string::npos);
  const Problem alias = only_problem("x: &a [1]\nprogram: *a\n");
  EXPECT_NE(alias.message.find("aliases"), std::string::npos);
  const Problem list = only_problem("- program\n");
  EXPECT_EQ(list.key, "recipe");
  EXPECT_NE(list.message.find("expected a mapping"), std::string::npos);
}

TEST(ProgramPlaceholders, Expand) {
  ProgramValues v;
  v.batch = 64;
  v.steps = 20;
  v.threads_per_rank = 4;
  v.ranks_per_node = 2;
  v.ranks = 8;
  v.bucket_mb = 0.5;
  EXPECT_EQ(*expand_placeholders("--batch={batch} --gb {global_batch} {steps}", v),
            "--batch=64 --gb 512 20");
  EXPECT_EQ(*expand_placeholders("{threads}x{ranks_per_node}/{ranks} {bucket_mb}", v), "4x2/8 0.5");
  EXPECT_EQ(*expand_placeholders("{{batch}} {{{batch}}} }}{{", v), "{batch} {64} }{");
  EXPECT_EQ(*expand_placeholders("", v), "");
  EXPECT_EQ(*expand_placeholders("no braces", v), "no braces");
  v.bucket_mb = 4;
  EXPECT_EQ(*expand_placeholders("{bucket_mb}", v), "4");
  v.bucket_mb = 25.25;
  EXPECT_EQ(*expand_placeholders("{bucket_mb}", v), "25.25");
  struct Bad {
    const char* text;
    const char* says;
  };
  for (const Bad& b : {Bad{"{threds}", "unknown placeholder {threds} (did you mean '{threads}'"},
                       Bad{"{}", "unknown placeholder {}"}, Bad{"a{batch", "unmatched '{'"},
                       Bad{"a{b{batch}", "unmatched '{' at character 2"},
                       Bad{"{batch}}", "unmatched '}' at character 8"}}) {
    auto r = expand_placeholders(b.text, v);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(r.error().message().find(b.says), std::string::npos) << r.error().message();
  }
  ProgramValues unset;
  for (const char* name : {"{batch}", "{global_batch}", "{steps}", "{threads}", "{ranks}",
                           "{ranks_per_node}", "{bucket_mb}"}) {
    auto r = expand_placeholders(name, unset);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_NE(r.error().message().find("has no value"), std::string::npos) << name;
  }
}

TEST(ProgramPlaceholders, CommandAndEnv) {
  const ProgramParseOutcome o = parse(kFull);
  ASSERT_TRUE(o.ok()) << all_problems(o);
  ProgramValues v;
  v.batch = 32;
  v.steps = 10;
  v.threads_per_rank = 2;
  v.ranks_per_node = 2;
  v.ranks = 2;
  v.bucket_mb = 0.5;
  EXPECT_EQ(*program_command(o.recipe, v),
            (std::vector<std::string>{"python3", "train.py", "--batch-size", "32", "--steps", "10",
                                      "--seed", "7"}));
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(*program_env(o.recipe, v), (Env{{"MY_BUCKET", "0.5"},
                                            {"WORKERS", "2"},
                                            {"DLTUNE_BUCKET_MB", "0.5"},
                                            {"DLTUNE_BATCH", "32"}}));
  v.bucket_mb = 4;
  EXPECT_EQ(program_env(o.recipe, v)->at(2),
            (std::pair<std::string, std::string>{"DLTUNE_BUCKET_MB", "4"}));
  // Unset values: an error naming the element; nothing exported for them.
  v.bucket_mb = 0;
  auto env = program_env(o.recipe, v);
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.error().message().find("program.env.MY_BUCKET: {bucket_mb} has no value"),
            std::string::npos)
      << env.error().message();
  v.batch = 0;
  auto cmd = program_command(o.recipe, v);
  ASSERT_FALSE(cmd.ok());
  EXPECT_NE(cmd.error().message().find("program.command[3]: {batch}"), std::string::npos);
  ProgramRecipe plain = o.recipe;
  plain.env.clear();
  EXPECT_TRUE(program_env(plain, v)->empty());
}

class ProgramSignature : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dltune-program-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    write("train.py", "print('v1')\n");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  ProgramRecipe parsed(const std::string& text) {
    const ProgramParseOutcome o = parse_program_recipe(text, dir_ + "/p.yaml", dir_);
    EXPECT_TRUE(o.ok()) << all_problems(o);
    return o.recipe;
  }
  std::string dir_;
};

TEST_F(ProgramSignature, CoversWhatAPlanDependsOn) {
  const ProgramRecipe base = parsed(kFull);
  const std::string sig = program_signature(base);
  ASSERT_EQ(sig.size(), 64u);  // the database's key takes a SHA-256's 64 hex digits
  EXPECT_EQ(sig.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(program_signature(base), sig);  // deterministic
  auto changed = [&](void (*edit)(ProgramRecipe&)) {
    ProgramRecipe r = base;
    edit(r);
    return program_signature(r) != sig;
  };
  EXPECT_TRUE(changed([](ProgramRecipe& r) { r.command[1] = "other.py"; }));
  EXPECT_TRUE(changed([](ProgramRecipe& r) { r.command.push_back("--fast"); }));
  EXPECT_TRUE(changed([](ProgramRecipe& r) { r.env[1].second = "3"; }));
  EXPECT_TRUE(changed([](ProgramRecipe& r) { r.env.emplace_back("X", "1"); }));
  EXPECT_TRUE(changed([](ProgramRecipe& r) { r.throughput.pattern = "sps=([0-9]+)"; }));
  EXPECT_TRUE(changed([](ProgramRecipe& r) { r.search.batch.push_back(256); }));
  EXPECT_TRUE(changed([](ProgramRecipe& r) { r.search.threads_auto = false; }));
  EXPECT_TRUE(changed([](ProgramRecipe& r) { r.search.bucket_mb[0] = 1; }));
  EXPECT_TRUE(changed([](ProgramRecipe& r) { r.launch.binding = "numa"; }));
  EXPECT_TRUE(changed([](ProgramRecipe& r) { r.launch.threads_per_rank = 2; }));
  // Not the name, description, lengths, budget, screening, restarts or the env's order.
  EXPECT_FALSE(changed([](ProgramRecipe& r) {
    r.name = "other";
    r.description = "another";
    r.steps = 5000;
    r.trial_steps = 3;
    r.trial_timeout_s = 999;
    r.budget_seconds = 1;
    r.screening = "off";
    r.launch.restarts = 7;
    std::swap(r.env[0], r.env[1]);
  }));
}

TEST_F(ProgramSignature, CoversTheFilesTheCommandNames) {
  const ProgramRecipe r = parsed(kFull);
  const std::string before = program_signature(r);
  write("train.py", "print('v2')\n");
  const std::string after = program_signature(r);
  EXPECT_NE(after, before);
  write("train.py", "print('v1')\n");
  EXPECT_EQ(program_signature(r), before);
  // An absolute path is read as well; an argument that names no file is just text.
  ProgramRecipe abs = r;
  abs.command[1] = dir_ + "/train.py";
  const std::string abs_before = program_signature(abs);
  write("train.py", "print('v3')\n");
  EXPECT_NE(program_signature(abs), abs_before);
  ProgramRecipe elsewhere = r;
  elsewhere.source_dir = dir_ + "/nowhere";
  const std::string missing = program_signature(elsewhere);
  write("train.py", "print('v4')\n");
  EXPECT_EQ(program_signature(elsewhere), missing);
}

// Every field of two recipes, for the round trip.
void expect_same(const ProgramRecipe& a, const ProgramRecipe& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.throughput.pattern, b.throughput.pattern);
  EXPECT_EQ(a.throughput.metrics_key, b.throughput.metrics_key);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.trial_steps, b.trial_steps);
  EXPECT_EQ(a.trial_timeout_s, b.trial_timeout_s);
  EXPECT_EQ(a.budget_seconds, b.budget_seconds);
  EXPECT_EQ(a.screening, b.screening);
  EXPECT_EQ(a.search.batch, b.search.batch);
  EXPECT_EQ(a.search.threads_per_rank, b.search.threads_per_rank);
  EXPECT_EQ(a.search.threads_auto, b.search.threads_auto);
  EXPECT_EQ(a.search.ranks_per_node, b.search.ranks_per_node);
  EXPECT_EQ(a.search.ranks_auto, b.search.ranks_auto);
  EXPECT_EQ(a.search.bucket_mb, b.search.bucket_mb);
  EXPECT_EQ(a.launch.ranks, b.launch.ranks);
  EXPECT_EQ(a.launch.ranks_per_node, b.launch.ranks_per_node);
  EXPECT_EQ(a.launch.threads_per_rank, b.launch.threads_per_rank);
  EXPECT_EQ(a.launch.binding, b.launch.binding);
  EXPECT_EQ(a.launch.restarts, b.launch.restarts);
  EXPECT_EQ(program_signature(a), program_signature(b));
}

TEST(ProgramYaml, RoundTrip) {
  const char* const kTricky = R"(name: '123'
description: "two\nlines, \"quoted\", tab\there, ünïcode"
program:
  command: ["64", "true", "null", "", " lead", "trail ", "a: b", "#x", "{{literal}}", '\d+', -x,
            ".Inf", "[list]", "{batch}", 0x10, ".inf", "auto", "--lr=0.1"]
  env: {"NULL": "~", T: "yes", R: 'x\y', E: ""}
  throughput: {pattern: 'it/s: (\d+(?:\.\d+)?) ''q'' "d"'}
  trial_timeout: 0.25
tune: {budget: 0, search: {batch: [1], threads_per_rank: [1, 4096], bucket_mb: [0.1, 1e-3, 4096]}}
launch: {ranks: 4, ranks_per_node: 2, binding: none, restarts: 100}
)";
  for (const char* text :
       {kFull, kTricky, "program: {command: [x], throughput: {metrics: 'a b: c'}}\n"}) {
    SCOPED_TRACE(text);
    const ProgramParseOutcome first = parse(text);
    ASSERT_TRUE(first.ok()) << all_problems(first);
    const std::string yaml = program_recipe_to_yaml(first.recipe);
    const ProgramParseOutcome again = parse(yaml);
    ASSERT_TRUE(again.ok()) << yaml << all_problems(again);
    expect_same(first.recipe, again.recipe);
    EXPECT_EQ(program_recipe_to_yaml(again.recipe), yaml);
    if (text == kTricky) {  // text YAML would read as a number, boolean or null stays quoted
      EXPECT_NE(yaml.find(R"(command: ["64", "true", "null", "",)"), std::string::npos) << yaml;
    }
  }
}

TEST(ProgramYaml, EveryKeyWithItsDefault) {
  const ProgramParseOutcome o =
      parse("program: {command: [python3, t.py], throughput: {metrics: sps}}\n");
  ASSERT_TRUE(o.ok()) << all_problems(o);
  EXPECT_EQ(program_recipe_to_yaml(o.recipe), R"(name: p
description: ""
program:
  command: [python3, t.py]
  env: {}
  throughput: {metrics: sps}
  steps: 100
  trial_steps: 20
  trial_timeout: 120
tune:
  budget: 120
  screening: auto
  search: {}
launch:
  ranks: auto
  ranks_per_node: auto
  threads_per_rank: auto
  binding: auto
  restarts: 0
)");
}

TEST(ProgramNames, TellsProgramFromModelRecipes) {
  EXPECT_TRUE(names_program(kFull));
  EXPECT_TRUE(names_program("{program: {command: [a]}}"));
  EXPECT_TRUE(names_program("model: lenet\nprogram: x\n"));  // still the program parser's
  EXPECT_TRUE(names_program("# a comment\nprogram:\n"));
  auto quickstart = paths::read_file(std::string(DLTUNE_SOURCE_DIR) + "/recipes/quickstart.yaml");
  ASSERT_TRUE(quickstart.ok());
  EXPECT_FALSE(names_program(*quickstart));
  EXPECT_FALSE(names_program("model: lenet\ndata: {kind: mnist, program: x}\n"));
  EXPECT_FALSE(names_program("- program\n"));
  EXPECT_FALSE(names_program("program"));
  EXPECT_FALSE(names_program(""));
  EXPECT_FALSE(names_program("program: [unclosed\n"));     // not YAML
  EXPECT_FALSE(names_program("program: x\n---\nb: 1\n"));  // two documents
  EXPECT_FALSE(names_program(std::string("program: \xff\xfe\n")));
  EXPECT_FALSE(
      names_program("\x7f"
                    "ELF\x02\x01\x01"));
}

TEST(ProgramFiles, ParseFileAndLoad) {
  char tmpl[] = "/tmp/dltune-program-file-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/good.yaml") << "program: {command: [./run], throughput: {metrics: k}}\n";
  std::ofstream(dir + "/bad.yaml") << "program: {command: [], throughput: {metrics: k}}\nx: 1\n";
  const ProgramParseOutcome good = parse_program_recipe_file(dir + "/good.yaml");
  ASSERT_TRUE(good.ok()) << all_problems(good);
  EXPECT_EQ(good.recipe.name, "good");
  EXPECT_EQ(good.recipe.source_path, dir + "/good.yaml");
  EXPECT_EQ(good.recipe.source_dir, dir);
  auto loaded = load_program_recipe(dir + "/good.yaml");
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->command, std::vector<std::string>{"./run"});
  auto bad = load_program_recipe(dir + "/bad.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(bad.error().message().find(dir + "/bad.yaml:1:20: program.command: "),
            std::string::npos)
      << bad.error().message();
  EXPECT_NE(bad.error().message().find("\n" + dir + "/bad.yaml:2:1: x: unknown key"),
            std::string::npos)
      << bad.error().message();
  const ProgramParseOutcome missing = parse_program_recipe_file(dir + "/none.yaml");
  ASSERT_EQ(missing.problems.size(), 1u);
  EXPECT_EQ(missing.problems[0].line, 0);
  EXPECT_EQ(missing.problems[0].key, "recipe");
  EXPECT_FALSE(load_program_recipe(dir + "/none.yaml").ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dltune::recipes
