// The predictor's gradient buckets (predict/model_costs.h, which does not link the engine) are
// the trainer's (engine/train/trainer.h): same count, sizes and order, for chains, residual
// networks and a transformer with tied embeddings, at several bucket sizes.
#include <string>

#include <gtest/gtest.h>

#include "engine/train/train_data.h"
#include "engine/train/trainer.h"
#include "recipes/model/builtins.h"

#include "predict/model_costs.h"

namespace dltune {
namespace {

struct Case {
  const char* model;
  const char* data;
};

TEST(Buckets, PredictorOrderIsTheTrainers) {
  for (const Case& k : {Case{"lenet", "synthetic"}, Case{"resnet20", "synthetic-cifar"},
                        Case{"gpt-tiny", "text:/usr/share/common-licenses/GPL-3"}}) {
    for (uint64_t bucket : {uint64_t{16} << 10, uint64_t{256} << 10, uint64_t{4} << 20}) {
      engine::TrainConfig c;
      c.model = k.model;
      c.data = k.data;
      c.train_size = 64;
      c.heldout_size = 0;
      c.heldout_split = std::string(k.data).rfind("text:", 0) == 0 ? 0.1 : 0.0;
      c.per_rank_batch = 2;
      c.global_batch = 2;
      c.bucket_bytes = bucket;
      engine::Dataset train;
      ASSERT_TRUE(engine::load_train_data(c, &train, nullptr, 64).ok()) << k.model;
      auto t = engine::Trainer::create(c, nullptr, train, nullptr);
      ASSERT_TRUE(t.ok()) << k.model << ": " << t.error().message();
      const auto& want = (*t)->buckets();
      auto graph = recipes::builtin_graph(k.model, {});
      ASSERT_TRUE(graph.has_value());
      auto costs = predict::model_costs(*graph, k.model);
      ASSERT_TRUE(costs.ok());
      const auto got = predict::gradient_buckets(costs->info, bucket);
      ASSERT_EQ(got.size(), want.size()) << k.model << " at " << bucket;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].floats, want[i].end - want[i].begin) << k.model << " bucket " << i;
      }
    }
  }
}

}  // namespace
}  // namespace dltune
