// Recipe + Plan -> TrainConfig (engine/recipe_config.h), for every bundled recipe, plus the
// TrainConfig pieces it needs: custom layer lists, synthetic-imagenet, the recipe schedule.
#include "engine/train/recipe_config.h"

#include <filesystem>

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/paths.h"
#include "engine/data/dataset.h"
#include "engine/graph/model.h"
#include "engine/train/trainer.h"
#include "recipes/datasets.h"
#include "recipes/model/builtins.h"

namespace dltune::engine {
namespace {

namespace fs = std::filesystem;
using recipes::Algorithm;
using recipes::default_plan;
using recipes::Plan;
using recipes::Recipe;

Recipe bundled(const char* name) {
  auto r = recipes::load_recipe(name);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r.ok() ? *r : Recipe{};
}

// A temporary directory holding a copy of a bundled recipe and small data files.
struct TempRecipeDir {
  fs::path dir =
      fs::temp_directory_path() / ("dltune-recipe-config-test-" + std::to_string(getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempRecipeDir() { fs::create_directories(dir); }
  ~TempRecipeDir() { fs::remove_all(dir); }
  void write(const std::string& rel, const std::string& bytes) {
    fs::create_directories((dir / rel).parent_path());
    ASSERT_TRUE(paths::write_file_atomic((dir / rel).string(), bytes).ok());
  }
  Recipe load(const char* name) {
    auto src = recipes::find_bundled_recipe(name);
    EXPECT_TRUE(src.ok());
    fs::copy_file(*src, dir / (std::string(name) + ".yaml"));
    auto r = recipes::load_recipe((dir / (std::string(name) + ".yaml")).string());
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? *r : Recipe{};
  }
};

std::string mnist_images(int n) {
  return encode_mnist_images(std::vector<uint8_t>(static_cast<size_t>(n) * 784, 7), n, 28, 28);
}
std::string mnist_labels(int n) { return encode_mnist_labels(std::vector<uint8_t>(n, 3)); }
std::string cifar_records(int n) { return std::string(static_cast<size_t>(n) * 3073, '\1'); }

TEST(RecipeConfig, QuickstartMapsToLenetOnSyntheticDigits) {
  const Recipe r = bundled("quickstart");
  auto c = train_config_from(r, default_plan(1, 2, 64, Algorithm::kRing), 2);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->model, "lenet");
  EXPECT_EQ(recipes::describe_graph(c->graph),
            recipes::describe_graph(*recipes::builtin_graph("lenet", {})));
  EXPECT_EQ(c->data, "synthetic");
  EXPECT_EQ(c->train_size, 18000);
  EXPECT_EQ(c->heldout_size, 2000);
  EXPECT_EQ(c->scaling, Scaling::kWeak);
  EXPECT_EQ(c->global_batch_for(2), 128);
  EXPECT_DOUBLE_EQ(c->lr, 0.02);
  EXPECT_EQ(c->schedule, recipes::ScheduleKind::kCosine);
  EXPECT_EQ(c->warmup_steps, 20);
  EXPECT_EQ(c->steps, 300);
  EXPECT_EQ(c->seed, 42u);
  EXPECT_EQ(c->checkpoint_every, 100);
  ASSERT_EQ(c->algorithms.size(), 1u);
  EXPECT_EQ(c->algorithms[0].algorithm, Algorithm::kRing);
  EXPECT_TRUE(c->metrics_path.empty() && c->checkpoint_path.empty() && c->trace_path.empty());
  EXPECT_EQ(*recipes::train_samples(r), 18000);
  EXPECT_EQ(c->threads, 1);
  EXPECT_EQ(c->precision, "fp32");
  EXPECT_TRUE(c->kernels.empty());
}

// How the ranks compute comes from the plan: threads per rank, precision, kernels per node; a
// kernel the model's node does not have is refused when the trainer is built.
TEST(RecipeConfig, ThreadsPrecisionAndKernelsComeFromThePlan) {
  const Recipe r = bundled("quickstart");
  Plan p = default_plan(1, 2, 64, Algorithm::kRing);
  p.job.threads_per_rank = 3;
  p.training.precision = "bf16";
  p.training.kernels = {{"conv2d1", "im2col"}};
  auto c = train_config_from(r, p, 2);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->threads, 3);
  EXPECT_EQ(c->precision, "bf16");
  EXPECT_EQ(c->kernels, p.training.kernels);
  p.training.precision = "fp16";
  EXPECT_FALSE(train_config_from(r, p, 2).ok());
}

TEST(RecipeConfig, AlexnetUsesSyntheticImagenet) {
  const Recipe r = bundled("alexnet");
  auto c = train_config_from(r, default_plan(1, 4, 16, Algorithm::kRing), 4);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->model, "alexnet");
  EXPECT_EQ(c->graph.nodes.size(), 22u);
  EXPECT_EQ(c->data, "synthetic-imagenet");
  EXPECT_EQ(c->input, (recipes::Shape{3, 227, 227}));
  EXPECT_EQ(c->classes, 10);
  EXPECT_EQ(c->heldout_size + c->train_size, 2048);
  EXPECT_EQ(c->heldout_size, 205);  // 10 % of 2048, rounded
  EXPECT_EQ(c->global_batch_for(4), 64);
  EXPECT_EQ(c->steps, 40);
  EXPECT_EQ(c->warmup_steps, 5);
}

TEST(RecipeConfig, CifarCnnIsALayerListAndEpochsCountFileSamples) {
  TempRecipeDir t;
  for (int i = 1; i <= 5; ++i)
    t.write("data/cifar10/data_batch_" + std::to_string(i) + ".bin", cifar_records(60));
  t.write("data/cifar10/test_batch.bin", cifar_records(10));
  const Recipe r = t.load("cifar-cnn");
  Plan plan = default_plan(1, 2, 64, Algorithm::kRing);
  plan.training.scaling = recipes::Scaling::kStrong;
  plan.training.global_batch = 128;
  auto c = train_config_from(r, plan, 2);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->model, "cifar-cnn");
  EXPECT_EQ(c->input, (recipes::Shape{3, 32, 32}));
  EXPECT_EQ(c->classes, 10);
  EXPECT_EQ(c->data, "cifar10:" + (t.dir / "data/cifar10").string());
  EXPECT_EQ(*recipes::train_samples(r), 300);
  EXPECT_EQ(c->steps, 5 * 3);  // 5 epochs of ceil(300 / 128) steps
  EXPECT_EQ(c->scaling, Scaling::kStrong);
  EXPECT_EQ(c->global_batch_for(2), 128);
  EXPECT_EQ(c->schedule, recipes::ScheduleKind::kStep);
  EXPECT_EQ(c->step_size, 1500);
  // The graph builds the same network the recipe describes (145,578 parameters).
  auto m = Model::build(c->graph, c->model);
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->num_params(), 145578);
}

TEST(RecipeConfig, LenetMnistCountsTheIdxHeader) {
  TempRecipeDir t;
  t.write("data/mnist/train-images-idx3-ubyte", mnist_images(300));
  t.write("data/mnist/train-labels-idx1-ubyte", mnist_labels(300));
  t.write("data/mnist/t10k-images-idx3-ubyte", mnist_images(20));
  t.write("data/mnist/t10k-labels-idx1-ubyte", mnist_labels(20));
  const Recipe r = t.load("lenet-mnist");
  auto c = train_config_from(r, default_plan(1, 2, 64, Algorithm::kRing), 2);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->model, "lenet");
  EXPECT_EQ(c->data, "mnist:" + (t.dir / "data/mnist").string());
  EXPECT_EQ(c->steps, 2 * 3);  // 2 epochs of ceil(300 / 128)
  EXPECT_EQ(c->schedule, recipes::ScheduleKind::kStep);
  EXPECT_EQ(c->warmup_steps, 50);
  EXPECT_DOUBLE_EQ(c->gamma, 0.1);
  // Missing files: the error names the file.
  Recipe gone = r;
  gone.data.path = (t.dir / "nowhere").string();
  auto e = train_config_from(gone, default_plan(1, 2, 64, Algorithm::kRing), 2);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().kind(), ErrorKind::kIo);
  EXPECT_NE(e.error().message().find("nowhere/train-images-idx3-ubyte"), std::string::npos)
      << e.error().message();
}

TEST(RecipeConfig, AHeldoutShareOfFileDataSplitsTheTrainingFiles) {
  TempRecipeDir t;
  t.write("data/mnist/train-images-idx3-ubyte", mnist_images(300));
  t.write("data/mnist/train-labels-idx1-ubyte", mnist_labels(300));
  t.write("data/mnist/t10k-images-idx3-ubyte", mnist_images(20));  // the bundled recipe's
  t.write("data/mnist/t10k-labels-idx1-ubyte", mnist_labels(20));  // `heldout: test` needs them
  Recipe r = t.load("lenet-mnist");
  r.data.heldout_test_files = false;
  r.data.heldout_fraction = 0.2;
  auto c = train_config_from(r, default_plan(1, 2, 64, Algorithm::kRing), 2);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_DOUBLE_EQ(c->heldout_split, 0.2);
  EXPECT_EQ(*recipes::train_samples(r), 240);  // 300 minus the 60 held out
  EXPECT_EQ(c->steps, 2 * 2);                  // 2 epochs of ceil(240 / 128)
  // The worker's split: the same counts as the config promised.
  auto train = load_dataset(c->data, true, 0, c->seed);
  ASSERT_TRUE(train.ok()) << train.error().message();
  auto held = split_heldout(*train, heldout_count(train->size, c->heldout_split), c->seed);
  ASSERT_TRUE(held.ok()) << held.error().message();
  EXPECT_EQ(train->size, *recipes::train_samples(r));
  EXPECT_EQ(held->size, 60);
  // `heldout: test` still means the test files, and a share of synthetic data is not a split.
  r.data.heldout_test_files = true;
  auto test_files = train_config_from(r, default_plan(1, 2, 64, Algorithm::kRing), 2);
  ASSERT_TRUE(test_files.ok()) << test_files.error().message();
  EXPECT_DOUBLE_EQ(test_files->heldout_split, 0.0);
  TrainConfig bad;
  bad.heldout_split = 0.1;  // on synthetic data
  ASSERT_FALSE(validate(bad).ok());
  EXPECT_NE(validate(bad).error().message().find("mnist / cifar10 / text data only"),
            std::string::npos);
  bad.data = "mnist:/x";
  bad.heldout_split = 0.7;
  EXPECT_FALSE(validate(bad).ok());
}

TEST(RecipeConfig, StrongAndWeakBatchesLrScaleAndWarmup) {
  const Recipe r = bundled("quickstart");
  Plan weak = default_plan(1, 4, 32, Algorithm::kRing);
  weak.training.lr_scale = 2.0;
  weak.training.warmup_steps = 100;
  auto c = train_config_from(r, weak, 4);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->per_rank_batch, 32);
  EXPECT_EQ(c->global_batch_for(4), 128);
  EXPECT_DOUBLE_EQ(c->lr, 0.04);    // 0.02 x lr_scale 2
  EXPECT_EQ(c->warmup_steps, 100);  // max(recipe 20, plan 100)

  Plan strong = default_plan(1, 3, 33, Algorithm::kRing);
  strong.training.scaling = recipes::Scaling::kStrong;
  auto s = train_config_from(r, strong, 3);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->scaling, Scaling::kStrong);
  EXPECT_EQ(s->global_batch_for(3), 99);
  EXPECT_EQ(s->global_batch_for(5), 99);  // strong: fixed whatever the rank count

  Plan tiny = default_plan(1, 2, 1, Algorithm::kRing);  // global batch 2 ...
  tiny.training.scaling = recipes::Scaling::kStrong;
  auto few = train_config_from(r, tiny, 3);  // ... over 3 ranks
  ASSERT_FALSE(few.ok());
  EXPECT_EQ(few.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(few.error().message().find("plan.parallel: 2 replicas x 1 stages is not the job's 3"),
            std::string::npos)
      << few.error().message();
  Plan tiny3 = default_plan(1, 3, 1, Algorithm::kRing);
  tiny3.training.scaling = recipes::Scaling::kStrong;
  tiny3.training.global_batch = 2;  // 3 replicas, 2 samples
  auto fewer = train_config_from(r, tiny3, 3);
  ASSERT_FALSE(fewer.ok());
  EXPECT_NE(fewer.error().message().find("global_batch"), std::string::npos)
      << fewer.error().message();

  auto mismatch = train_config_from(r, weak, 3);  // a 4-rank weak plan run on 3 ranks
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.error().message().find("4 replicas x 1 stages is not the job's 3 ranks"),
            std::string::npos)
      << mismatch.error().message();
  EXPECT_FALSE(train_config_from(r, weak, 0).ok());
}

TEST(RecipeConfig, PlanAlgorithmsBecomeInclusiveRanges) {
  const Recipe r = bundled("quickstart");
  Plan p = default_plan(1, 2, 64, Algorithm::kRing);
  p.collectives[recipes::Collective::kAllreduce] = {
      {0, 4096, Algorithm::kRecursiveDoubling, 0},
      {4096, 1 << 20, Algorithm::kRing, 0},
      {1 << 20, recipes::kPlanMaxBytes, Algorithm::kRing, 1 << 20}};
  auto c = train_config_from(r, p, 2);
  ASSERT_TRUE(c.ok()) << c.error().message();
  ASSERT_EQ(c->algorithms.size(), 3u);  // the two ring ranges differ in their segment
  EXPECT_EQ(c->algorithms[0].max_bytes, 4095u);
  EXPECT_EQ(c->algorithm_for(4095), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(c->algorithm_for(4096), Algorithm::kRing);
  EXPECT_EQ(c->range_for(4096).segment_bytes, 0u);
  EXPECT_EQ(c->algorithm_for(UINT64_MAX), Algorithm::kRing);
  EXPECT_EQ(c->range_for(1 << 20).segment_bytes, uint64_t{1} << 20);
  EXPECT_EQ(c->range_for(UINT64_MAX).segment_bytes, uint64_t{1} << 20);

  p.collectives[recipes::Collective::kAllreduce][1].segment_bytes = 1 << 20;
  auto merged = train_config_from(r, p, 2);
  ASSERT_TRUE(merged.ok()) << merged.error().message();
  ASSERT_EQ(merged->algorithms.size(), 2u);  // same algorithm, same segment: one range
  EXPECT_EQ(merged->range_for(4096).segment_bytes, uint64_t{1} << 20);

  // Hierarchical keeps its segment (its ring among nodes); other algorithms have none.
  p.collectives[recipes::Collective::kAllreduce] = {
      {0, 4096, Algorithm::kRecursiveDoubling, 4096},
      {4096, recipes::kPlanMaxBytes, Algorithm::kHierarchical, 262144}};
  auto hier = train_config_from(r, p, 2);
  ASSERT_TRUE(hier.ok()) << hier.error().message();
  EXPECT_EQ(hier->range_for(0).segment_bytes, 0u);
  EXPECT_EQ(hier->algorithm_for(4096), Algorithm::kHierarchical);
  EXPECT_EQ(hier->range_for(4096).segment_bytes, 262144u);

  p.collectives.clear();  // no rules: ring everywhere
  auto none = train_config_from(r, p, 2);
  ASSERT_TRUE(none.ok()) << none.error().message();
  ASSERT_EQ(none->algorithms.size(), 1u);
  EXPECT_EQ(none->algorithm_for(1), Algorithm::kRing);

  p.collectives[recipes::Collective::kAllreduce] = {
      {0, recipes::kPlanMaxBytes, Algorithm::kNcclRing, 0}};
  auto gpu = train_config_from(r, p, 2);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(gpu.error().message().find("plan.collectives.allreduce[0]: algorithm 'nccl_ring'"),
            std::string::npos)
      << gpu.error().message();

  Plan broken = default_plan(1, 2, 64, Algorithm::kRing);
  broken.training.bucket_bytes = 0;
  EXPECT_FALSE(train_config_from(r, broken, 2).ok());
}

TEST(RecipeConfig, RecipeSettingsTheEngineLacksAreErrors) {
  Recipe r = bundled("quickstart");
  r.training.optimizer.kind = "adam";
  auto e = train_config_from(r, default_plan(1, 2, 64, Algorithm::kRing), 2);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("training.optimizer.kind"), std::string::npos);
  Recipe f = bundled("quickstart");
  f.model.dtype = "bf16";
  EXPECT_FALSE(train_config_from(f, default_plan(1, 2, 64, Algorithm::kRing), 2).ok());
}

TEST(TrainConfigExtensions, ScheduleFromZeroAndCosineFloor) {
  TrainConfig c;
  c.lr = 0.1;
  c.schedule = recipes::ScheduleKind::kCosine;
  c.min_lr = 0.01;
  c.warmup_steps = 10;
  c.steps = 110;
  EXPECT_NEAR(learning_rate(c, 0), 0.01, 1e-12);  // 0.1 x 1/10
  EXPECT_NEAR(learning_rate(c, 9), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate(c, 10), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate(c, 60), 0.055, 1e-12);  // half way down to the floor
  EXPECT_NEAR(learning_rate(c, 110), 0.01, 1e-12);

  const std::vector<void (*)(TrainConfig&)> bad = {[](TrainConfig& t) {
                                                     t.input = {1, -2};
                                                   },
                                                   [](TrainConfig& t) { t.min_lr = -1; },
                                                   [](TrainConfig& t) { t.optimizer = "lamb"; },
                                                   [](TrainConfig& t) { t.beta2 = 1; }};
  for (size_t i = 0; i < bad.size(); ++i) {
    TrainConfig t;
    bad[i](t);
    auto st = validate(t);
    ASSERT_FALSE(st.ok()) << i;
    EXPECT_EQ(st.error().kind(), ErrorKind::kInvalidInput) << st.error().message();
  }
}

TEST(TrainConfigExtensions, CustomLayersTrainOnSyntheticImages) {
  TrainConfig c;
  c.model = "tiny";
  c.input = {3, 8, 8};
  c.classes = 5;
  recipes::OpAttrs conv, pool, fc;
  conv.out = 4, conv.kernel = 3, conv.pad = 1;
  pool.kernel = 2, pool.stride = 2;
  fc.out = 5;
  c.graph = recipes::chain_graph({3, 8, 8}, {{"", recipes::OpKind::kConv2d, conv, {}},
                                             {"", recipes::OpKind::kRelu, {}, {}},
                                             {"", recipes::OpKind::kMaxPool, pool, {}},
                                             {"", recipes::OpKind::kLinear, fc, {}}});
  c.data = "synthetic-imagenet";
  c.global_batch = 8;
  c.steps = 3;
  ASSERT_TRUE(validate(c).ok()) << validate(c).error().message();
  const TrainConfig* parsed = &c;
  auto train = load_dataset(parsed->data, true, 32, 1, parsed->input, parsed->classes);
  ASSERT_TRUE(train.ok()) << train.error().message();
  EXPECT_EQ(train->shape, (recipes::Shape{3, 8, 8}));
  EXPECT_EQ(train->size, 32);
  for (int32_t y : train->labels) EXPECT_TRUE(y >= 0 && y < 5);
  for (float x : train->images) ASSERT_TRUE(x >= -1.0f && x < 1.0f);
  // Deterministic, and train and held-out differ.
  auto again = load_dataset(parsed->data, true, 32, 1, parsed->input, parsed->classes);
  auto held = load_dataset(parsed->data, false, 32, 1, parsed->input, parsed->classes);
  EXPECT_EQ(again->images, train->images);
  EXPECT_NE(held->images, train->images);
  auto t = Trainer::create(*parsed, nullptr, *train, nullptr);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ((*t)->model().name(), "tiny");
  EXPECT_EQ((*t)->model().num_params(), (4 * 3 * 9 + 4) + (4 * 4 * 4 * 5 + 5));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*t)->step().ok());
  // A default synthetic-imagenet is 3x224x224 with 1000 classes.
  auto def = load_dataset("synthetic-imagenet", true, 2, 1);
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->shape, (recipes::Shape{3, 224, 224}));
  EXPECT_EQ(def->classes, 1000);
}

}  // namespace
}  // namespace dltune::engine
