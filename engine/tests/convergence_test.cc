// Convergence: the Caffe LeNet on the synthetic digits reaches >= 95 % held-out accuracy within
// a bounded number of steps (fixed seed). Labelled `integration` (too heavy for ASan runs).
#include <gtest/gtest.h>

#include "engine/train/trainer.h"

namespace dltune::engine {
namespace {

TEST(Convergence, LenetOnSyntheticDigitsReaches95Percent) {
  TrainConfig c;
  c.model = "lenet";
  c.train_size = 8192;
  c.heldout_size = 2000;
  c.global_batch = 64;
  c.lr = 0.01;
  c.momentum = 0.9;
  c.weight_decay = 5e-4;
  c.steps = 200;
  c.eval_every = 100;
  c.seed = 1;
  Dataset train = synthetic_digits(c.train_size, c.seed);
  auto heldout = load_dataset("synthetic", false, c.heldout_size, c.seed);
  ASSERT_TRUE(heldout.ok());
  auto t = Trainer::create(c, nullptr, train, &*heldout);
  ASSERT_TRUE(t.ok()) << t.error().message();
  MetricsWriter none;
  auto s = (*t)->run(none);
  ASSERT_TRUE(s.ok()) << s.error().message();
  RecordProperty("heldout_accuracy", std::to_string(s->heldout_accuracy));
  RecordProperty("samples_per_s", std::to_string(s->samples_per_s));
  std::printf("lenet synthetic: %lld steps, held-out accuracy %.4f, loss %.4f, %.0f samples/s\n",
              static_cast<long long>(s->steps), s->heldout_accuracy, s->final_loss,
              s->samples_per_s);
  EXPECT_GE(s->heldout_accuracy, 0.95);
}

}  // namespace
}  // namespace dltune::engine
