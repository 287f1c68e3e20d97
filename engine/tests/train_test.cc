// Single-rank training: config validation, learning-rate schedules, SGD, checkpoints and exact
// resume.
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/paths.h"
#include "engine/io/checkpoint.h"
#include "engine/optim/optimizer.h"
#include "engine/tests/temp_dir.h"
#include "engine/train/metrics.h"
#include "engine/train/train_config.h"
#include "engine/train/trainer.h"
#include "recipes/model/builtins.h"

namespace dltune::engine {
namespace {

TEST(TrainConfig, RangesAndValidation) {
  TrainConfig c;
  c.model = "mlp";
  c.algorithms = {{65536, Algorithm::kRecursiveDoubling}, {UINT64_MAX, Algorithm::kRing, 262144}};
  ASSERT_TRUE(validate(c).ok());
  EXPECT_EQ(c.algorithm_for(100), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(c.range_for(100).segment_bytes, 0u);
  EXPECT_EQ(c.algorithm_for(1 << 20), Algorithm::kRing);
  EXPECT_EQ(c.range_for(1 << 20).segment_bytes, 262144u);

  struct {
    void (*change)(TrainConfig&);
    const char* expect;
  } bad[] = {{[](TrainConfig& t) { t.lr = -1; }, "'lr': must be positive"},
             {[](TrainConfig& t) { t.scaling = Scaling::kAuto; }, "must be strong or weak"},
             {[](TrainConfig& t) {
                t.algorithms = {{10, Algorithm::kRing}, {5, Algorithm::kRecursiveDoubling}};
              },
              "sorted"},
             {[](TrainConfig& t) { t.stages = 2; }, "one first node per stage"}};
  for (const auto& b : bad) {
    TrainConfig t = c;
    b.change(t);
    auto st = validate(t);
    ASSERT_FALSE(st.ok()) << b.expect;
    EXPECT_EQ(st.error().kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(st.error().message().find(b.expect), std::string::npos) << st.error().message();
  }
}

TEST(Schedule, WarmupFromZeroThenStepOrCosine) {
  TrainConfig c;
  c.lr = 0.4;  // the peak: the plan's lr_scale already applied
  c.warmup_steps = 10;
  c.steps = 110;
  // Linear warm-up from 0: step s < 10 runs at 0.4 x (s + 1) / 10.
  EXPECT_NEAR(learning_rate(c, 0), 0.04, 1e-12);
  EXPECT_NEAR(learning_rate(c, 4), 0.2, 1e-12);
  EXPECT_NEAR(learning_rate(c, 10), 0.4, 1e-12);
  c.schedule = recipes::ScheduleKind::kStep;
  c.step_size = 30;
  EXPECT_NEAR(learning_rate(c, 39), 0.4, 1e-12);
  EXPECT_NEAR(learning_rate(c, 40), 0.04, 1e-12);
  c.schedule = recipes::ScheduleKind::kCosine;
  EXPECT_NEAR(learning_rate(c, 60), 0.2, 1e-12);
  EXPECT_NEAR(learning_rate(c, 110), 0.0, 1e-12);
}

TEST(Sgd, MomentumAndWeightDecayMatchTheFormula) {
  Sgd sgd(2, 0.9f, 0.1f);
  float w[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f};
  sgd.step(w, g, 0.1f);  // v = g + 0.1 w = {0.6, 0.05}
  EXPECT_NEAR(w[0], 1.0f - 0.06f, 1e-6);
  EXPECT_NEAR(w[1], -2.0f - 0.005f, 1e-6);
  sgd.step(w, g, 0.1f);  // v = 0.9 v + g + 0.1 w
  const float v0 = 0.9f * 0.6f + 0.5f + 0.1f * 0.94f;
  EXPECT_NEAR(w[0], 0.94f - 0.1f * v0, 1e-6);
}

TEST(AdamW, MatchesTheFormulaWithDecoupledDecay) {
  AdamW adam(1, 0.9f, 0.99f, 1e-8f, 0.1f);
  float w = 2.0f;
  const float g = 0.5f;
  adam.step(&w, &g, 0.01f);
  // t = 1: m = 0.05, v = 0.0025; mhat = 0.5, vhat = 0.25; w = 2 (1 - 0.001) - 0.01 * 0.5 / 0.5
  EXPECT_NEAR(w, 2.0f * 0.999f - 0.01f, 1e-6);
  adam.step(&w, &g, 0.01f);
  const double m = 0.9 * 0.05 + 0.1 * 0.5, v = 0.99 * 0.0025 + 0.01 * 0.25;
  const double mhat = m / (1 - 0.81), vhat = v / (1 - 0.9801);
  const double want = (2.0 * 0.999 - 0.01) * 0.999 - 0.01 * mhat / (std::sqrt(vhat) + 1e-8);
  EXPECT_NEAR(w, want, 1e-6);
  EXPECT_EQ(adam.steps(), 2);
}

TEST(ClipGradNorm, ScalesToTheMaximumOnlyWhenAbove) {
  float g[2] = {3.0f, 4.0f};
  EXPECT_NEAR(clip_grad_norm(g, 2, 10.0), 5.0, 1e-9);
  EXPECT_EQ(g[0], 3.0f);
  EXPECT_NEAR(clip_grad_norm(g, 2, 1.0), 5.0, 1e-9);
  EXPECT_NEAR(g[0], 0.6f, 1e-6);
  EXPECT_NEAR(g[1], 0.8f, 1e-6);
}

TrainConfig small_config() {
  TrainConfig c;
  c.model = "lenet5";
  c.train_size = 512;
  c.heldout_size = 0;
  c.global_batch = 32;
  c.lr = 0.05;
  c.steps = 20;
  c.seed = 11;
  return c;
}

using test_support::TempDir;

// small_config(), its data, and a checkpoint path in a fresh temporary directory (empty when
// the directory could not be made).
struct CheckpointSetup {
  TrainConfig c = small_config();
  Dataset data = synthetic_digits(c.train_size, c.seed);
  TempDir dir;
  std::string path = dir.path.empty() ? std::string() : dir.path + "/ck.bin";
};

// run()'s checkpoints: by steps, by seconds (rank 0's clock), and the last one at the end, never
// twice for one step; the background write is done when run() returns and loads.
TEST(Checkpoint, RunCheckpointsByStepsAndBySeconds) {
  struct Case {
    int64_t every;
    double every_s;
    int64_t want;
  };
  for (const Case& k : {Case{5, 0, 4},       // steps 5, 10, 15, 20 (the last one is the end)
                        Case{0, 1e-9, 20},   // every step's interval has passed
                        Case{0, 1e6, 1},     // only the end
                        Case{7, 1e6, 3}}) {  // 7, 14, and the end at 20
    CheckpointSetup s;
    ASSERT_FALSE(s.path.empty());
    s.c.steps = 20;
    s.c.checkpoint_every = k.every;
    s.c.checkpoint_every_s = k.every_s;
    s.c.checkpoint_path = s.path;
    auto t = Trainer::create(s.c, nullptr, s.data, nullptr);
    ASSERT_TRUE(t.ok()) << t.error().message();
    MetricsWriter metrics;
    auto sum = (*t)->run(metrics);
    ASSERT_TRUE(sum.ok()) << sum.error().message();
    EXPECT_EQ(sum->checkpoints, k.want) << k.every << " steps, " << k.every_s << " s";
    EXPECT_TRUE(sum->checkpoint_background);
    auto ck = load_checkpoint(s.path);
    ASSERT_TRUE(ck.ok()) << ck.error().message();
    EXPECT_EQ(ck->step, 20);
  }
}

TEST(Checkpoint, ResumeIsExact) {
  const CheckpointSetup s;
  ASSERT_FALSE(s.path.empty());
  const auto& [c, data, dir, path] = s;

  auto straight = Trainer::create(c, nullptr, data, nullptr);
  ASSERT_TRUE(straight.ok()) << straight.error().message();
  for (int i = 0; i < 2 * 7; ++i) ASSERT_TRUE((*straight)->step().ok());

  auto first = Trainer::create(c, nullptr, data, nullptr);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE((*first)->step().ok());
  ASSERT_TRUE((*first)->save(path).ok());
  auto second = Trainer::create(c, nullptr, data, nullptr);
  auto st = (*second)->resume(path);
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ((*second)->steps_done(), 7);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE((*second)->step().ok());

  Model& a = (*straight)->model();
  Model& b = (*second)->model();
  ASSERT_EQ(a.num_params(), b.num_params());
  for (int64_t i = 0; i < a.num_params(); ++i) ASSERT_EQ(a.params()[i], b.params()[i]) << i;

  // A corrupted file, or one of another model, is refused with a reason.
  auto text = paths::read_file(path);
  std::string broken = *text;
  broken[broken.size() - 3] ^= 0x55;
  ASSERT_TRUE(paths::write_file_atomic(path, broken).ok());
  auto r = load_checkpoint(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("checksum mismatch"), std::string::npos);
  ASSERT_TRUE(paths::write_file_atomic(path, text->substr(0, text->size() - 10)).ok());
  r = load_checkpoint(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("truncated"), std::string::npos);
  // Hostile metadata: a parameter count 2^62 larger makes the declared size wrap around to the
  // real one (the checksum still matches), and metadata nested too deep; each refused, naming why.
  {
    const size_t start = text->find('\n') + 1, eol = text->find('\n', start);
    auto meta = nlohmann::json::parse(text->substr(start, eol - start));
    meta["params"] = meta["params"].get<uint64_t>() + (uint64_t{1} << 62);
    ASSERT_TRUE(
        paths::write_file_atomic(path, text->substr(0, start) + meta.dump() + text->substr(eol))
            .ok());
    r = load_checkpoint(path);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message().find("declares more values than"), std::string::npos)
        << r.error().message();
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    ASSERT_TRUE(
        paths::write_file_atomic(path, text->substr(0, start) + deep + text->substr(eol)).ok());
    r = load_checkpoint(path);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message().find("nested deeper"), std::string::npos) << r.error().message();
  }
  ASSERT_TRUE(paths::write_file_atomic(path, *text).ok());
  TrainConfig other = c;
  other.model = "mlp";
  auto t3 = Trainer::create(other, nullptr, data, nullptr);
  ASSERT_TRUE(t3.ok());
  auto s3 = (*t3)->resume(path);
  ASSERT_FALSE(s3.ok());
  EXPECT_NE(s3.error().message().find("of model 'lenet5'"), std::string::npos);
}

// A residual network with batch norm trained by AdamW with clipping: the checkpoint carries the
// running statistics and both moments, so a resumed run ends bit for bit where one straight run
// ends.
TEST(Checkpoint, ResumeIsExactWithBatchNormAndAdamW) {
  TrainConfig c;
  c.model = "resnet20";
  c.data = "synthetic-cifar";
  c.train_size = 64;
  c.heldout_size = 0;
  c.global_batch = 8;
  c.optimizer = "adamw";
  c.lr = 1e-3;
  c.weight_decay = 0.05;
  c.clip_grad_norm = 1.0;
  c.steps = 6;
  c.seed = 3;
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string path = dir.path + "/ck.bin";
  Dataset data = synthetic_cifar(c.train_size, c.seed);
  auto straight = Trainer::create(c, nullptr, data, nullptr);
  ASSERT_TRUE(straight.ok()) << straight.error().message();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE((*straight)->step().ok());
  auto first = Trainer::create(c, nullptr, data, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*first)->step().ok());
  ASSERT_TRUE((*first)->save(path).ok());
  auto second = Trainer::create(c, nullptr, data, nullptr);
  auto st = (*second)->resume(path);
  ASSERT_TRUE(st.ok()) << st.error().message();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*second)->step().ok());
  const Model& a = (*straight)->model();
  const Model& b = (*second)->model();
  for (int64_t i = 0; i < a.num_params(); ++i) ASSERT_EQ(a.params()[i], b.params()[i]) << i;
  ASSERT_GT(a.num_state(), 0);
  for (int64_t i = 0; i < a.num_state(); ++i) ASSERT_EQ(a.state()[i], b.state()[i]) << i;
  // A checkpoint of another optimizer is refused with a reason.
  TrainConfig sgd = c;
  sgd.optimizer = "sgd";
  auto third = Trainer::create(sgd, nullptr, data, nullptr);
  ASSERT_TRUE(third.ok());
  auto refused = (*third)->resume(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("optimizer adamw"), std::string::npos)
      << refused.error().message();
}

// The summary says how many steps this run executed and timed: a resumed run executes only
// the steps after its checkpoint, and times all of them (its caches are warm from the first).
TEST(Trainer, SummaryCountsTheStepsThisRunExecuted) {
  const CheckpointSetup s;
  ASSERT_FALSE(s.path.empty());
  const auto& [c, data, dir, path] = s;
  MetricsWriter none;

  auto fresh = Trainer::create(c, nullptr, data, nullptr);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message();
  auto all = (*fresh)->run(none);
  ASSERT_TRUE(all.ok()) << all.error().message();
  EXPECT_EQ(all->steps, c.steps);
  EXPECT_EQ(all->steps_run, c.steps);
  EXPECT_EQ(all->timed_steps, c.steps - 1);

  auto first = Trainer::create(c, nullptr, data, nullptr);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE((*first)->step().ok());
  ASSERT_TRUE((*first)->save(path).ok());
  auto second = Trainer::create(c, nullptr, data, nullptr);
  ASSERT_TRUE((*second)->resume(path).ok());
  auto rest = (*second)->run(none);
  ASSERT_TRUE(rest.ok()) << rest.error().message();
  EXPECT_EQ(rest->steps, c.steps);
  EXPECT_EQ(rest->steps_run, c.steps - 7);
  EXPECT_EQ(rest->timed_steps, c.steps - 7);
}

TEST(Trainer, RejectsMismatchedModelAndData) {
  TrainConfig c = small_config();
  c.model = "cifar-cnn";
  Dataset data = synthetic_digits(64, 1);
  auto t = Trainer::create(c, nullptr, data, nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message().find("expects inputs 3x32x32"), std::string::npos)
      << t.error().message();
  c.model = "lenet5";
  c.algorithms = {{UINT64_MAX, Algorithm::kNcclRing}};  // NCCL's, on the CPU engine
  t = Trainer::create(c, nullptr, data, nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message().find("nccl_ring is NCCL's"), std::string::npos)
      << t.error().message();
}

TEST(Trainer, LossDecreasesOnSyntheticDigits) {
  TrainConfig c = small_config();
  c.steps = 40;
  Dataset data = synthetic_digits(c.train_size, c.seed);
  auto t = Trainer::create(c, nullptr, data, nullptr);
  ASSERT_TRUE(t.ok());
  double first = 0, last = 0;
  for (int i = 0; i < c.steps; ++i) {
    auto l = (*t)->step();
    ASSERT_TRUE(l.ok());
    if (i < 5) first += *l;
    if (i >= c.steps - 5) last += *l;
  }
  EXPECT_LT(last, 0.7 * first);
}

// The recipe tuner frees a trainer's scratch between its chunks of steps: the next step
// allocates it again and trains exactly as if nothing had happened (AlexNet-style layers
// included: grouped conv, LRN, max pool, dropout).
TEST(Trainer, ReleasingScratchBetweenStepsChangesNothing) {
  using recipes::OpKind;
  TrainConfig lenet = small_config();
  TrainConfig odd = small_config();  // grouped conv, LRN, max pool, dropout
  odd.model = "odd";
  std::vector<recipes::Node> layers;
  auto add = [&](OpKind op, auto set) {
    recipes::Node n{"", op, {}, {}};
    set(n.attrs);
    layers.push_back(n);
  };
  auto none = [](recipes::OpAttrs&) {};
  add(OpKind::kConv2d, [](auto& a) { a.out = 8, a.kernel = 5; });
  add(OpKind::kRelu, none);
  add(OpKind::kLrn, none);
  add(OpKind::kMaxPool, [](auto& a) { a.kernel = 2, a.stride = 2; });
  add(OpKind::kConv2d, [](auto& a) { a.out = 16, a.kernel = 3, a.pad = 1, a.groups = 2; });
  add(OpKind::kRelu, none);
  add(OpKind::kAvgPool, [](auto& a) { a.kernel = 2, a.stride = 2; });
  add(OpKind::kLinear, [](auto& a) { a.out = 32; });
  add(OpKind::kRelu, none);
  add(OpKind::kDropout, none);
  add(OpKind::kLinear, [](auto& a) { a.out = 10; });
  odd.graph = recipes::chain_graph({1, 28, 28}, layers);
  for (const TrainConfig& c : {lenet, odd}) {
    Dataset data = synthetic_digits(c.train_size, c.seed);
    auto kept = Trainer::create(c, nullptr, data, nullptr);
    auto freed = Trainer::create(c, nullptr, data, nullptr);
    ASSERT_TRUE(kept.ok()) << kept.error().message();
    ASSERT_TRUE(freed.ok()) << freed.error().message();
    for (int i = 0; i < 4; ++i) {
      auto a = (*kept)->step();
      (*freed)->release_scratch();
      auto b = (*freed)->step();
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(*a, *b) << c.model << " step " << i;
    }
    const Model& a = (*kept)->model();
    const Model& b = (*freed)->model();
    for (int64_t i = 0; i < a.num_params(); ++i) ASSERT_EQ(a.params()[i], b.params()[i]) << i;
  }
}

// An update that diverges in a step whose loss was still finite (the loss is computed before
// it): the checkpoint due after that step is not written, and the run ends saying why.
TEST(Trainer, NonFiniteParametersAreNeverCheckpointed) {
  CheckpointSetup s;
  ASSERT_FALSE(s.path.empty());
  TrainConfig& c = s.c;
  c.lr = 1e300;  // infinite as the optimizer's float: the first update ruins the parameters
  c.steps = 5;
  c.checkpoint_every = 1;
  c.checkpoint_path = s.path;
  auto t = Trainer::create(c, nullptr, s.data, nullptr);
  ASSERT_TRUE(t.ok()) << t.error().message();
  MetricsWriter metrics;
  auto r = (*t)->run(metrics);
  ASSERT_FALSE(r.ok()) << "trained at lr 1e300";
  EXPECT_TRUE((*t)->diverged());
  EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(r.error().message().find("training diverged: the parameters are not finite at step 1"),
            std::string::npos)
      << r.error().message();
  EXPECT_NE(access(c.checkpoint_path.c_str(), F_OK), 0) << "a ruined checkpoint was written";
}

// A learning rate far too high makes the loss NaN: run() must end with an error that says so
// (not train on and report a loss of 0), and must not checkpoint the ruined parameters.
TEST(Trainer, DivergenceEndsTheRunWithAClearErrorAndNoRuinedCheckpoint) {
  CheckpointSetup s;
  ASSERT_FALSE(s.path.empty());
  TrainConfig& c = s.c;
  c.lr = 500;
  c.steps = 200;
  c.checkpoint_every = 1;
  c.checkpoint_path = s.path;
  auto t = Trainer::create(c, nullptr, s.data, nullptr);
  ASSERT_TRUE(t.ok()) << t.error().message();
  MetricsWriter metrics;
  auto r = (*t)->run(metrics);
  ASSERT_FALSE(r.ok()) << "trained 200 steps at lr 500 without diverging";
  EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidInput);
  const std::string m = r.error().message();
  // The loss of a logged step, or the parameters when a checkpoint is due (an update that
  // diverged in a step whose loss was still finite).
  EXPECT_TRUE(m.find("training diverged: the loss is") != std::string::npos ||
              m.find("training diverged: the parameters are not finite") != std::string::npos)
      << m;
  EXPECT_NE(m.find("global batch 32"), std::string::npos) << m;
  EXPECT_LT((*t)->steps_done(), c.steps);
  // Every checkpoint written was of a step whose loss was finite.
  if (access(c.checkpoint_path.c_str(), F_OK) == 0) {
    auto ck = load_checkpoint(c.checkpoint_path);
    ASSERT_TRUE(ck.ok()) << ck.error().message();
    EXPECT_LT(ck->step, (*t)->steps_done());
    for (float p : ck->params) ASSERT_TRUE(std::isfinite(p));
  }
}

}  // namespace
}  // namespace dltune::engine
