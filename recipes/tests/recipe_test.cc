// Recipes that parse: defaults, built-in models, the bundled recipes, signatures, the JSON view
// and re-validation after an override.
#include "recipes/recipe.h"

#include <algorithm>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/paths.h"

#include "dltune/config.h"

namespace dltune::recipes {
namespace {

namespace fs = std::filesystem;

std::string all_problems(const ParseOutcome& o) {
  std::string out;
  for (const Problem& p : o.problems) out += p.to_string() + "\n";
  return out;
}

ParseOutcome parse(const std::string& text) { return parse_recipe(text, "t.yaml", "/tmp"); }

// The learning-rate rules: linear (auto) and square root of the batch ratio, both ways; the
// names round-trip.
TEST(LrScaling, RulesAndNames) {
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kLinear, 512, 128), 4.0);
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kAuto, 512, 128), 4.0);
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kSqrt, 512, 128), 2.0);
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kSqrt, 32, 128), 0.5);
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kLinear, 32, 128), 0.25);
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kSqrt, 128, 0), 1.0);  // no reference: unscaled
  EXPECT_DOUBLE_EQ(lr_scale_for(LrScaling::kNone, 512, 128), 1.0);
  for (LrScaling s : {LrScaling::kAuto, LrScaling::kLinear, LrScaling::kSqrt, LrScaling::kNone}) {
    EXPECT_EQ(parse_lr_scaling(lr_scaling_name(s)), s);
  }
  EXPECT_FALSE(parse_lr_scaling("Sqrt").has_value());
}

TEST(RecipeParse, MinimalRecipeGetsTheDocumentedDefaults) {
  const ParseOutcome o = parse("model: mlp\ndata: synthetic-digits\n");
  ASSERT_TRUE(o.ok()) << all_problems(o);
  const Recipe& r = o.recipe;
  EXPECT_EQ(r.name, "t");
  EXPECT_EQ(r.model.builtin, "mlp");
  EXPECT_EQ(r.model.input, (Shape{1, 28, 28}));
  EXPECT_EQ(r.data.kind, DataKind::kSyntheticDigits);
  EXPECT_EQ(r.data.samples, 20000);
  EXPECT_DOUBLE_EQ(r.data.heldout_fraction, 0.1);
  EXPECT_EQ(r.training.epochs, 1);
  EXPECT_EQ(r.training.steps, 0);
  EXPECT_EQ(r.training.per_rank_batch, 0);  // auto
  EXPECT_EQ(r.training.scaling, Scaling::kAuto);
  EXPECT_EQ(r.training.optimizer.lr_scaling, LrScaling::kAuto);
  EXPECT_EQ(r.comm.backend, "auto");
  EXPECT_FALSE(r.comm.allreduce.has_value());
  EXPECT_EQ(r.comm.bucket_bytes, 0u);
  EXPECT_EQ(r.launch.ranks, 0);
  EXPECT_EQ(r.launch.binding, "auto");
  EXPECT_DOUBLE_EQ(r.tune.budget_seconds, 60);
}

TEST(RecipeParse, ReadsEverySection) {
  const ParseOutcome o = parse(R"(name: full
model:
  layers:
    - conv2d: {out: 8, kernel: 3, pad: 1}
    - relu
    - maxpool: {kernel: 2}
    - dropout: {p: 0.25}
    - linear: {out: 10}
data: {kind: synthetic-digits, samples: 5000, heldout: 0.2}
training:
  steps: 200
  batch: {global: 128, max_global: 1024}
  scaling: strong
  optimizer: {lr: 0.1, momentum: 0.8, weight_decay: 0.001, lr_reference_batch: 64, lr_scaling: sqrt}
  schedule: {kind: step, warmup_steps: 10, step_size: 50, gamma: 0.5}
  checkpoint_every: 50
  seed: 7
comm: {backend: mpi, allreduce: rabenseifner, bucket: 8MiB, overlap: off}
tune: {budget: 30, objective: time-to-accuracy, target_accuracy: 0.9}
launch: {ranks: 4, ranks_per_node: 2, binding: core}
)");
  ASSERT_TRUE(o.ok()) << all_problems(o);
  const Recipe& r = o.recipe;
  ASSERT_EQ(r.model.graph.nodes.size(), 5u);
  EXPECT_EQ(r.model.form, ModelForm::kLayers);
  EXPECT_EQ(r.model.graph.nodes[0].op, OpKind::kConv2d);
  EXPECT_EQ(r.model.graph.nodes[0].name, "conv2d1");
  EXPECT_EQ(r.model.graph.nodes[0].attrs.pad, 1);
  EXPECT_EQ(r.model.graph.nodes[2].attrs.stride, 2);  // pools default to stride = kernel
  EXPECT_DOUBLE_EQ(r.model.graph.nodes[3].attrs.p, 0.25);
  EXPECT_TRUE(r.model.graph.nodes[4].attrs.flatten);  // linear in a chain flattens
  EXPECT_EQ(r.data.samples, 5000);
  EXPECT_EQ(r.training.global_batch, 128);
  EXPECT_EQ(r.training.max_global_batch, 1024);
  EXPECT_EQ(r.training.scaling, Scaling::kStrong);
  EXPECT_EQ(r.training.schedule.kind, ScheduleKind::kStep);
  EXPECT_EQ(r.training.schedule.step_size, 50);
  EXPECT_EQ(r.training.optimizer.lr_reference_batch, 64);
  EXPECT_EQ(r.training.optimizer.lr_scaling, LrScaling::kSqrt);
  EXPECT_EQ(r.training.seed, 7u);
  EXPECT_EQ(r.comm.allreduce, Algorithm::kRabenseifner);
  EXPECT_EQ(r.comm.bucket_bytes, 8u << 20);
  EXPECT_EQ(r.comm.overlap, Overlap::kOff);
  EXPECT_EQ(r.tune.objective, Objective::kTimeToAccuracy);
  EXPECT_EQ(r.launch.ranks_per_node, 2);
}

TEST(RecipeModels, BuiltinParameterCountsMatchTheCaffeModels) {
  // shared/fixtures/SOURCES.md: LeNet 431,080; AlexNet (grouped convolutions) 60,965,224.
  struct Case {
    const char* name;
    Shape input;
    int64_t classes;
    int64_t parameters;
  };
  for (const Case& c :
       {Case{"lenet", {1, 28, 28}, 10, 431080}, Case{"alexnet", {3, 227, 227}, 1000, 60965224},
        Case{"cifar-cnn", {3, 32, 32}, 10, 145578}, Case{"lenet5", {1, 28, 28}, 10, 61706},
        Case{"mlp", {1, 28, 28}, 10, 535818}}) {
    SCOPED_TRACE(c.name);
    BuiltinOptions o;
    o.classes = c.classes;
    o.input = c.input;
    auto graph = builtin_graph(c.name, o);
    ASSERT_TRUE(graph.has_value());
    const GraphInfo s = analyze_graph(*graph);
    ASSERT_TRUE(s.problems.empty()) << s.problems[0].second;
    EXPECT_EQ(s.parameters, c.parameters);
    EXPECT_EQ(s.output(), (Shape{c.classes}));
  }
  EXPECT_FALSE(builtin_graph("resnet", BuiltinOptions{}).has_value());
}

TEST(RecipeModels, AlexnetDoesNotFitDigits) {
  const ParseOutcome o = parse("model: alexnet\ndata: synthetic-digits\n");
  ASSERT_EQ(o.problems.size(), 1u);
  EXPECT_EQ(o.problems[0].key, "model");
  EXPECT_NE(o.problems[0].message.find("does not fit"), std::string::npos) << o.problems[0].message;
}

TEST(RecipeBundled, EveryBundledRecipeIsValidApartFromAbsentDataFiles) {
  const std::vector<BundledRecipe> list = list_bundled_recipes();
  std::vector<std::string> names;
  for (const BundledRecipe& b : list) names.push_back(b.name);
  for (const char* want : {"quickstart", "lenet-mnist", "alexnet", "cifar-cnn"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  for (const BundledRecipe& b : list) {
    SCOPED_TRACE(b.name);
    const ParseOutcome o = parse_recipe_file(b.path);
    // lenet-mnist and cifar-cnn read files that a fresh checkout does not have.
    for (const Problem& p : o.problems) EXPECT_EQ(p.key, "data.path") << p.to_string();
    EXPECT_EQ(o.recipe.name, b.name);
  }
}

TEST(RecipeBundled, QuickstartIsTwoRanksOfLenetOnSyntheticDigits) {
  auto r = load_recipe("quickstart");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->model.builtin, "lenet");
  EXPECT_EQ(r->data.kind, DataKind::kSyntheticDigits);
  EXPECT_EQ(r->launch.ranks, 2);
  EXPECT_EQ(r->training.per_rank_batch, 64);
  EXPECT_GT(r->training.steps, 0);
  EXPECT_FALSE(r->description.empty());
}

TEST(RecipeBundled, MnistRecipeIsValidWhenItsFilesExist) {
  const fs::path dir =
      fs::temp_directory_path() / ("dltune-recipe-test-" + std::to_string(getpid()));
  fs::create_directories(dir / "data/mnist");
  for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    ASSERT_TRUE(paths::write_file_atomic((dir / "data/mnist" / f).string(), "x").ok());
  auto src = find_bundled_recipe("lenet-mnist");
  ASSERT_TRUE(src.ok());
  fs::copy_file(*src, dir / "lenet-mnist.yaml");
  const ParseOutcome o = parse_recipe_file((dir / "lenet-mnist.yaml").string());
  EXPECT_TRUE(o.ok()) << all_problems(o);
  EXPECT_EQ(o.recipe.data.path, (dir / "data/mnist").string());
  EXPECT_TRUE(o.recipe.data.heldout_test_files);
  fs::remove_all(dir);
}

TEST(RecipeLoad, UnknownNameSuggestsABundledOne) {
  auto r = load_recipe("quickstrat");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kNotFound);
  EXPECT_NE(r.error().message().find("did you mean 'quickstart'?"), std::string::npos)
      << r.error().message();
}

TEST(RecipeLoad, BadRecipeGivesEveryProblemOnItsOwnLine) {
  const fs::path bad = fs::path(DLTUNE_SOURCE_DIR) / "recipes/tests/bad/several-at-once.yaml";
  auto r = load_recipe(bad.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().exit_code(), 2);
  EXPECT_EQ(std::count(r.error().message().begin(), r.error().message().end(), '\n'), 2)
      << r.error().message();
}

TEST(RecipeSignature, DependsOnStructureNotOnNamesPathsOrLaunch) {
  const ParseOutcome a = parse("name: a\nmodel: lenet\ndata: synthetic-digits\n");
  const ParseOutcome b = parse(
      "name: b\ndescription: other\nmodel: lenet\ndata: synthetic-digits\n"
      "training: {seed: 7, checkpoint_every: 3}\ntune: {budget: 5}\n"
      "launch: {ranks: 2, binding: core}\n");
  const ParseOutcome c = parse("name: a\nmodel: lenet5\ndata: synthetic-digits\n");
  const ParseOutcome d = parse(
      "model:\n  layers: [conv2d: {out: 20, kernel: 5}, maxpool: {kernel: 2}, "
      "conv2d: {out: 50, kernel: 5}, maxpool: {kernel: 2}, linear: {out: 500}, relu, "
      "linear: {out: 10}]\ndata: synthetic-digits\n");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << all_problems(a) << all_problems(b) << all_problems(c);
  ASSERT_TRUE(d.ok()) << all_problems(d);
  const std::string sa = recipe_signature(a.recipe);
  EXPECT_EQ(sa.size(), 64u);
  EXPECT_EQ(sa, recipe_signature(b.recipe));
  EXPECT_NE(sa, recipe_signature(c.recipe));
  EXPECT_EQ(sa, recipe_signature(d.recipe));  // the built-in lenet spelled out as layers
}

// Every setting a tuned plan depends on is in the key: a copy of a recipe that fixes another
// batch, warm-up, bucket ... never finds the original's plan (the reported bug: a copy of the
// quickstart with per_rank 32 and warmup 5 trained at 64 and 20 from the quickstart's plan).
TEST(RecipeSignature, EverySettingAPlanDependsOnChangesIt) {
  const std::string base =
      "model: lenet\ndata: {kind: synthetic-digits, samples: 20000}\n"
      "training: {steps: 300, batch: {per_rank: 64}, schedule: {kind: cosine, warmup_steps: 20}, "
      "optimizer: {lr: 0.02, lr_reference_batch: 128}}\n";
  const ParseOutcome ref = parse(base);
  ASSERT_TRUE(ref.ok()) << all_problems(ref);
  const std::string sig = recipe_signature(ref.recipe);
  struct Variant {
    const char* key;
    std::string from, to;
  };
  const Variant changes[] = {
      {"training.batch.per_rank", "per_rank: 64", "per_rank: 32"},
      {"training.batch.global", "batch: {per_rank: 64}", "batch: {global: 128}"},
      {"training.batch.max_global", "batch: {per_rank: 64}",
       "batch: {per_rank: 64, max_global: 256}"},
      {"training.schedule.warmup_steps", "warmup_steps: 20", "warmup_steps: 5"},
      {"training.schedule.kind", "kind: cosine", "kind: constant"},
      {"training.optimizer.lr_reference_batch", "lr_reference_batch: 128",
       "lr_reference_batch: 256"},
      {"training.optimizer.lr_scaling", "lr: 0.02", "lr: 0.02, lr_scaling: sqrt"},
      {"training.optimizer.momentum", "lr: 0.02", "lr: 0.02, momentum: 0.5"},
      {"training.scaling", "steps: 300", "steps: 300, scaling: weak"},
      {"data.samples", "samples: 20000", "samples: 10000"},
      {"data.heldout", "samples: 20000", "samples: 20000, heldout: 0.2"},
      {"comm.bucket", "model: lenet", "comm: {bucket: 1MiB}\nmodel: lenet"},
      {"comm.overlap", "model: lenet", "comm: {overlap: off}\nmodel: lenet"},
      {"comm.allreduce", "model: lenet", "comm: {allreduce: rd}\nmodel: lenet"},
      {"comm.backend", "model: lenet", "comm: {backend: mpi}\nmodel: lenet"},
      {"launch.memory_per_rank", "model: lenet", "launch: {memory_per_rank: 1GiB}\nmodel: lenet"},
      {"training.parallel.offload", "steps: 300", "steps: 300, parallel: {offload: none}"},
      {"training.precision", "steps: 300", "steps: 300, precision: bf16"},
      {"launch.threads_per_rank", "model: lenet", "launch: {threads_per_rank: 4}\nmodel: lenet"},
      {"tune.objective", "model: lenet",
       "tune: {objective: time-to-accuracy, target_accuracy: 0.9}\nmodel: lenet"},
  };
  for (const Variant& v : changes) {
    std::string text = base;
    const size_t at = text.find(v.from);
    ASSERT_NE(at, std::string::npos) << v.key;
    text.replace(at, v.from.size(), v.to);
    const ParseOutcome o = parse(text);
    ASSERT_TRUE(o.ok()) << v.key << ": " << all_problems(o);
    EXPECT_NE(recipe_signature(o.recipe), sig) << v.key << " is not in the signature";
  }
}

// Issue 42: what does not change what the tuner measures does not invalidate a plan. The run's
// length (steps or epochs) and its checkpoints are not in the key under the throughput
// objective; under time-to-accuracy the length is (the target takes a length to reach).
TEST(RecipeSignature, TheRunsLengthIsNotInItUnlessTheObjectiveIsAccuracy) {
  const std::string base =
      "model: lenet\ndata: {kind: synthetic-digits, samples: 20000}\n"
      "training: {steps: 300, batch: {per_rank: 64}}\n";
  const ParseOutcome ref = parse(base);
  ASSERT_TRUE(ref.ok()) << all_problems(ref);
  for (const std::string& other :
       {std::string("steps: 41, batch"), std::string("epochs: 3, batch"),
        std::string("steps: 300, checkpoint_every: 7, batch"),
        // The learning rate: the plan records the one it was tuned with, and a launch with
        // another uses it only where no trial scaled the rate (launcher/flow/launch_plan.cc).
        std::string("steps: 300, optimizer: {lr: 0.03}, batch")}) {
    std::string text = base;
    text.replace(text.find("steps: 300, batch"), 17, other);
    const ParseOutcome o = parse(text);
    ASSERT_TRUE(o.ok()) << other << ": " << all_problems(o);
    EXPECT_EQ(recipe_signature(o.recipe), recipe_signature(ref.recipe)) << other;
  }
  const std::string tta = "tune: {objective: time-to-accuracy, target_accuracy: 0.9}\n";
  std::string longer = base;
  longer.replace(longer.find("steps: 300"), 10, "steps: 400");
  EXPECT_NE(recipe_signature(parse(base + tta).recipe),
            recipe_signature(parse(longer + tta).recipe));
}

TEST(RecipeJson, ShowsNormalisedValuesAndParameterCount) {
  const ParseOutcome o = parse("model: lenet\ndata: synthetic-digits\ncomm: {bucket: 4MiB}\n");
  ASSERT_TRUE(o.ok()) << all_problems(o);
  const auto j = nlohmann::json::parse(recipe_to_json(o.recipe));
  EXPECT_EQ(j["model"]["parameters"], 431080);
  EXPECT_EQ(j["comm"]["bucket"], 4194304);
  EXPECT_EQ(j["comm"]["allreduce"], "auto");
  EXPECT_EQ(j["training"]["batch"]["per_rank"], "auto");
  EXPECT_EQ(j["launch"]["ranks"], "auto");
  EXPECT_EQ(j["signature"], recipe_signature(o.recipe));
}

TEST(RecipeValidate, RevalidatesAfterARankOverride) {
  ParseOutcome o = parse("model: lenet\ndata: synthetic-digits\ntraining: {batch: {global: 96}}\n");
  ASSERT_TRUE(o.ok()) << all_problems(o);
  o.recipe.launch.ranks = 3;
  EXPECT_TRUE(validate_recipe(o.recipe).empty());
  o.recipe.launch.ranks = 5;  // e.g. `dltune launch -n 5`
  const std::vector<Problem> problems = validate_recipe(o.recipe);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].to_string(),
            "t.yaml: training.batch.global: global batch 96 does not split evenly over "
            "launch.ranks 5; use a multiple of 5");
}

}  // namespace
}  // namespace dltune::recipes
