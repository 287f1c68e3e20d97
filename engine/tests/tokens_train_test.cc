// gpt-tiny trains on llm.c token shards through the whole path a launch takes: a recipe of
// `data: {kind: tokens}` (GPT-2's vocabulary becomes the model's), its TrainConfig, the
// engine's datasets read on demand and the trainer's loader. The shards hold a cycle of 23 GPT-2
// token ids from all over the vocabulary: a model that learns the cycle predicts every next
// token; one that learns nothing stays near ln(50257) = 10.8 nats.
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "engine/train/recipe_config.h"
#include "engine/train/train_data.h"
#include "engine/train/trainer.h"

namespace dltune::engine {
namespace {

namespace fs = std::filesystem;

TEST(TokensTraining, GptTinyLearnsACycleOfGpt2Tokens) {
  const fs::path dir = fs::temp_directory_path() / ("dltune-tokens-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<uint16_t> cycle(23);
  for (size_t i = 0; i < cycle.size(); ++i)
    cycle[i] = static_cast<uint16_t>((i * 2179 + 11) % 50257);
  for (const char* name : {"cyc_train_000.bin", "cyc_train_001.bin", "cyc_val_000.bin"}) {
    std::vector<uint16_t> tokens(name[4] == 'v' ? 801 : 3001);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = cycle[(i + name[4]) % cycle.size()];
    int32_t header[256] = {20240520, 1, static_cast<int32_t>(tokens.size())};
    std::ofstream f(dir / name, std::ios::binary);
    f.write(reinterpret_cast<const char*>(header), sizeof header);
    f.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(2 * tokens.size()));
  }
  const std::string yaml =
      "model: {builtin: gpt-tiny}\n"
      "data: {kind: tokens, path: 'cyc_*.bin', context: 32}\n"
      "training:\n  steps: 40\n  batch: {global: 8}\n"
      "  optimizer: {kind: adamw, lr: 0.003, weight_decay: 0.0}\n";
  const recipes::ParseOutcome o = recipes::parse_recipe(yaml, "t.yaml", dir.string());
  ASSERT_TRUE(o.ok()) << o.problems[0].to_string();
  auto c =
      train_config_from(o.recipe, recipes::default_plan(1, 1, 8, recipes::Algorithm::kRing), 1);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->data, "tokens:" + (dir / "cyc_*.bin").string());
  EXPECT_EQ(c->heldout_split, 0.0);  // held out: the last shard (cyc_val_000.bin)
  c->eval_every = 40;
  Dataset train, held;
  ASSERT_TRUE(load_train_data(*c, &train, &held).ok());
  EXPECT_EQ(train.size, 2 * (3000 / 32));
  EXPECT_EQ(held.size, 800 / 32);
  auto t = Trainer::create(*c, nullptr, train, &held);
  ASSERT_TRUE(t.ok()) << t.error().message();
  ASSERT_NE((*t)->loader(), nullptr);
  MetricsWriter none;
  auto sum = (*t)->run(none);
  ASSERT_TRUE(sum.ok()) << sum.error().message();
  std::printf("final loss %.3f, held-out loss %.3f, accuracy %.3f\n", sum->final_loss,
              sum->heldout_loss, sum->heldout_accuracy);
  EXPECT_LT(sum->final_loss, 1.0);
  EXPECT_GT(sum->heldout_accuracy, 0.9);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dltune::engine
