// `--set KEY=VALUE`: overrides checked as the file's values are, problems naming the override,
// the recipe as run; the normalised view without placeholders; dataset messages.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "common/paths.h"
#include "recipes/datasets.h"
#include "recipes/recipe_overrides.h"

namespace dltune::recipes {
namespace {

namespace fs = std::filesystem;

class Overrides : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dltune-overrides-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "r.yaml").string();
    ASSERT_TRUE(paths::write_file_atomic(path_,
                                         "name: r\n"
                                         "# a comment\n"
                                         "model: lenet\n"
                                         "data: synthetic-digits\n"
                                         "training:\n"
                                         "  steps: 100\n"
                                         "  batch: auto\n"
                                         "  schedule: cosine\n")
                    .ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  ParseOutcome with(const std::vector<std::string>& sets) {
    std::vector<Override> o;
    for (const auto& s : sets) {
      auto ov = parse_override(s);
      EXPECT_TRUE(ov.ok()) << s;
      if (ov) o.push_back(*ov);
    }
    return parse_recipe_with_overrides(path_, o);
  }

  fs::path dir_;
  std::string path_;
};

std::string all(const ParseOutcome& o) {
  std::string s;
  for (const Problem& p : o.problems) s += p.to_string() + "\n";
  return s;
}

TEST_F(Overrides, AnyKeyValidatedLikeTheFile) {
  auto o = with({"training.steps=10", "training.batch.per_rank=32", "data.samples=3000",
                 "training.schedule.warmup_steps=2", "comm.bucket=1MiB", "tune.budget=5"});
  ASSERT_TRUE(o.ok()) << all(o);
  EXPECT_EQ(o.recipe.training.steps, 10);
  EXPECT_EQ(o.recipe.training.per_rank_batch, 32);
  EXPECT_EQ(o.recipe.data.samples, 3000);  // `data: synthetic-digits` became a mapping
  EXPECT_EQ(o.recipe.data.kind, DataKind::kSyntheticDigits);
  EXPECT_EQ(o.recipe.training.schedule.kind, ScheduleKind::kCosine);
  EXPECT_EQ(o.recipe.training.schedule.warmup_steps, 2);
  EXPECT_EQ(o.recipe.comm.bucket_bytes, 1u << 20);
  EXPECT_DOUBLE_EQ(o.recipe.tune.budget_seconds, 5);
  // A list value, and the model's shorthand expanded.
  auto img = with({"data.kind=synthetic-imagenet", "data.shape=[3, 64, 64]", "data.classes=10",
                   "model.builtin=resnet18"});
  ASSERT_TRUE(img.ok()) << all(img);
  EXPECT_EQ(img.recipe.data.shape, (Shape{3, 64, 64}));
}

TEST_F(Overrides, ProblemsNameTheOverride) {
  auto bad = with({"training.steps=many"});
  ASSERT_EQ(bad.problems.size(), 1u) << all(bad);
  EXPECT_EQ(bad.problems[0].to_string(),
            "--set training.steps=many: training.steps: expected a positive integer, got \"many\"");
  auto typo = with({"training.stesp=10"});
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(all(typo).find("--set training.stesp=10: training.stesp: unknown key 'stesp' (did "
                           "you mean 'steps'?)"),
            std::string::npos)
      << all(typo);
  auto below = with({"name.x=1"});
  ASSERT_EQ(below.problems.size(), 1u);
  EXPECT_NE(below.problems[0].to_string().find("name is a value ('r'), not a section"),
            std::string::npos)
      << all(below);
  // The file's own problems keep their positions.
  auto zero = with({"training.steps=0"});
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.problems[0].file, "--set training.steps=0");
  EXPECT_EQ(zero.problems[0].line, 0);
}

// A file key that conflicts with an override keeps its position and says which override made
// it wrong and how to change it too.
TEST_F(Overrides, AFileKeyAnOverrideMadeWrongSaysSo) {
  ASSERT_TRUE(paths::write_file_atomic(path_,
                                       "name: r\nmodel: lenet\ndata: synthetic-digits\n"
                                       "training:\n  steps: 100\n"
                                       "  batch: {per_rank: 64, max_global: 128}\n")
                  .ok());
  auto o = with({"training.batch.max_global=32"});
  ASSERT_EQ(o.problems.size(), 1u) << all(o);
  EXPECT_EQ(o.problems[0].key, "training.batch.per_rank");
  EXPECT_GT(o.problems[0].line, 0);  // the file's key, where the file has it
  EXPECT_NE(o.problems[0].message.find("(with --set training.batch.max_global=32; add --set "
                                       "training.batch.per_rank=... to change it too)"),
            std::string::npos)
      << all(o);
  EXPECT_TRUE(with({"training.batch.max_global=32", "training.batch.per_rank=16"}).ok());
  // The override's own key is named by it, with no hint about itself.
  auto ck = with({"training.checkpoint_every=500"});
  ASSERT_EQ(ck.problems.size(), 1u) << all(ck);
  EXPECT_EQ(ck.problems[0].file, "--set training.checkpoint_every=500") << all(ck);
  EXPECT_EQ(all(ck).find("add --set"), std::string::npos) << all(ck);
}

// Issue 42: `--set training.steps=40` on a recipe whose schedule is counted for a longer run
// is the same run, shorter: the step counts that no longer fit keep their share of the file's
// run, the ones that fit stay, and one note says so; the recipe as run holds the same values.
TEST_F(Overrides, AShorterRunKeepsItsScheduleInProportion) {
  ASSERT_TRUE(
      paths::write_file_atomic(path_,
                               "name: r\nmodel: lenet\ndata: synthetic-digits\n"
                               "training:\n  steps: 300\n  checkpoint_every: 100\n"
                               "  schedule: {kind: step, warmup_steps: 20, step_size: 200}\n")
          .ok());
  std::vector<Override> o = {*parse_override("training.steps=40")};
  std::vector<std::string> notes;
  auto parsed = parse_recipe_with_overrides(path_, o, &notes);
  ASSERT_TRUE(parsed.ok()) << all(parsed);
  EXPECT_EQ(parsed.recipe.training.steps, 40);
  EXPECT_EQ(parsed.recipe.training.checkpoint_every, 13);       // 100 / 300 x 40
  EXPECT_EQ(parsed.recipe.training.schedule.step_size, 26);     // 200 / 300 x 40
  EXPECT_EQ(parsed.recipe.training.schedule.warmup_steps, 20);  // fits a 40-step run: kept
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "--set training.steps=40: the run is shorter than the file's schedule: "
            "checkpoint_every 100 -> 13, schedule.step_size 200 -> 26 (the share of the file's "
            "300 steps each had)");
  auto yaml = recipe_yaml_as_run(path_, parsed.recipe, o);
  ASSERT_TRUE(yaml.ok()) << yaml.error().message();
  auto again = load_recipe_text(*yaml, "recipe.yaml", dir_.string());
  ASSERT_TRUE(again.ok()) << again.error().message() << *yaml;
  EXPECT_EQ(again->training.checkpoint_every, 13);
  EXPECT_EQ(again->training.schedule.step_size, 26);

  // An override of the count itself is the user's: checked, never fitted.
  notes.clear();
  o.push_back(*parse_override("training.checkpoint_every=60"));
  auto own = parse_recipe_with_overrides(path_, o, &notes);
  ASSERT_EQ(own.problems.size(), 1u) << all(own);
  EXPECT_EQ(own.problems[0].file, "--set training.checkpoint_every=60");
  // A run too short for any decay step: the problem stays, with the hint.
  auto one = with({"training.steps=1"});
  ASSERT_EQ(one.problems.size(), 1u) << all(one);
  EXPECT_EQ(one.problems[0].key, "training.schedule.step_size");
  EXPECT_NE(one.problems[0].message.find("add --set training.schedule.step_size=..."),
            std::string::npos)
      << all(one);
}

// A file that gives epochs has no length in steps to take shares of: the counts that do not
// fit take the shares a recipe without them gets.
TEST_F(Overrides, StepsInsteadOfEpochsFitsTheScheduleToDefaultShares) {
  ASSERT_TRUE(
      paths::write_file_atomic(path_,
                               "name: r\nmodel: lenet\ndata: synthetic-digits\n"
                               "training:\n  epochs: 2\n  checkpoint_every: 500\n"
                               "  schedule: {kind: step, warmup_steps: 50, step_size: 1000}\n")
          .ok());
  std::vector<std::string> notes;
  auto parsed = parse_recipe_with_overrides(path_, {*parse_override("training.steps=40")}, &notes);
  ASSERT_TRUE(parsed.ok()) << all(parsed);
  EXPECT_EQ(parsed.recipe.training.epochs, 0);  // steps replaced them
  EXPECT_EQ(parsed.recipe.training.checkpoint_every, 10);
  EXPECT_EQ(parsed.recipe.training.schedule.warmup_steps, 2);
  EXPECT_EQ(parsed.recipe.training.schedule.step_size, 20);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("checkpoint_every 500 -> 10 (a quarter of the run, the default)"),
            std::string::npos)
      << notes[0];
  EXPECT_NE(notes[0].find("schedule.warmup_steps 50 -> 2 (5 % of the run)"), std::string::npos);
  EXPECT_NE(notes[0].find("schedule.step_size 1000 -> 20 (half the run)"), std::string::npos);
}

TEST_F(Overrides, TheSyntaxOfAnOverride) {
  EXPECT_FALSE(parse_override("training.steps").ok());
  EXPECT_FALSE(parse_override("=10").ok());
  EXPECT_FALSE(parse_override("training.steps=").ok());
  EXPECT_FALSE(parse_override("training..steps=1").ok());
  EXPECT_FALSE(parse_override("data.shape=[3, 64").ok());
  auto o = parse_override(" data.path = /data/cifar ");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->key, "data.path");
  EXPECT_EQ(o->value, "/data/cifar");
  EXPECT_NE(parse_override("steps").error().message().find("give KEY=VALUE such as "
                                                           "training.steps=10"),
            std::string::npos);
}

TEST_F(Overrides, TheRecipeAsRunReadsTheSameFromAnywhere) {
  std::vector<Override> o = {*parse_override("training.steps=7"), *parse_override("data.kind=text"),
                             *parse_override("model.builtin=gpt-tiny"),
                             *parse_override("data.path=t.txt")};
  std::string text(4000, 'x');
  ASSERT_TRUE(paths::write_file_atomic((dir_ / "t.txt").string(), text).ok());
  auto parsed = parse_recipe_with_overrides(path_, o);
  ASSERT_TRUE(parsed.ok()) << all(parsed);
  auto yaml = recipe_yaml_as_run(path_, parsed.recipe, o);
  ASSERT_TRUE(yaml.ok()) << yaml.error().message();
  EXPECT_NE(yaml->find("#   --set training.steps=7"), std::string::npos) << *yaml;
  const std::string elsewhere = (dir_ / "sub").string();
  fs::create_directories(elsewhere);
  ASSERT_TRUE(paths::write_file_atomic(elsewhere + "/recipe.yaml", *yaml).ok());
  auto again = parse_recipe_file(elsewhere + "/recipe.yaml");
  ASSERT_TRUE(again.ok()) << all(again) << *yaml;
  EXPECT_EQ(again.recipe.training.steps, 7);
  EXPECT_EQ(again.recipe.data.path, (dir_ / "t.txt").string());  // absolute
  EXPECT_EQ(again.recipe.name, "r");
  EXPECT_EQ(recipe_signature(again.recipe), recipe_signature(parsed.recipe));
}

TEST(RecipeShow, NoPlaceholdersInEitherForm) {
  ParseOutcome o = parse_recipe("model: lenet\ndata: synthetic-digits\ntraining: {steps: 10}\n",
                                "t.yaml", "/tmp");
  ASSERT_TRUE(o.ok());
  const auto j = nlohmann::json::parse(recipe_to_json(o.recipe));
  EXPECT_FALSE(j["training"].contains("epochs"));
  EXPECT_EQ(j["training"]["steps"], 10);
  EXPECT_FALSE(j["data"].contains("path"));
  EXPECT_FALSE(j["data"].contains("context"));
  EXPECT_FALSE(j.contains("description"));
  EXPECT_FALSE(j["training"]["optimizer"].contains("betas"));  // sgd
  EXPECT_FALSE(j["training"]["schedule"].contains("step_size"));
  EXPECT_FALSE(j["tune"].contains("target_accuracy"));
  const std::string yaml = recipe_to_yaml(o.recipe);
  EXPECT_EQ(yaml.rfind("name: t\n", 0), 0u) << yaml;  // in the order a recipe lists its keys
  EXPECT_NE(yaml.find("  steps: 10\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("parameters: 431080"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("shape: [1, 28, 28]"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("lr: 0.01\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("dltune model show lenet"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("epochs"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("\"\""), std::string::npos) << yaml;
  // It reads back as YAML.
  EXPECT_NO_THROW(YAML::Load(yaml));
}

TEST(Datasets, AMissingDatasetSaysWhatToFetchAndWhere) {
  ParseOutcome o =
      parse_recipe("model: lenet\ndata: {kind: mnist, path: /nowhere/mnist}\n", "t.yaml", "/tmp");
  ASSERT_EQ(o.problems.size(), 1u);
  const std::string m = o.problems[0].message;
  EXPECT_NE(m.find("fetch MNIST (train-images-idx3-ubyte.gz"), std::string::npos) << m;
  EXPECT_NE(m.find("https://"), std::string::npos) << m;
  EXPECT_NE(m.find("gunzip them into /nowhere/mnist"), std::string::npos) << m;
  EXPECT_NE(m.find("--set data.path=DIR"), std::string::npos) << m;
  const DatasetSource* c = dataset_source(DataKind::kCifar10);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->files.size(), 6u);
  EXPECT_EQ(c->archives.front().md5.size(), 32u);
  EXPECT_EQ(dataset_source(DataKind::kSyntheticDigits), nullptr);
}

}  // namespace
}  // namespace dltune::recipes
