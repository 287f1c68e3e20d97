// The real datasets' layouts (recipes/data_layout.h): image folders indexed as torchvision 0.14's
// ImageFolder indexes them, llm.c token shards checked and split, and the recipe keys of both.
#include "recipes/data_layout.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "recipes/recipe.h"

namespace dltune::recipes {
namespace {

namespace fs = std::filesystem;

class DataLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dltune-layout-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void touch(const fs::path& rel) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << "x";
  }
  std::string rel(const std::string& path) const { return fs::relative(path, dir_).string(); }
  // An llm.c shard: header (magic, version, count) + uint16 tokens; `count` may lie.
  std::string shard(const std::string& name, const std::vector<uint16_t>& tokens,
                    int32_t magic = kTokenShardMagic, int32_t version = 1, int32_t count = -1) {
    int32_t header[256] = {};
    header[0] = magic;
    header[1] = version;
    header[2] = count >= 0 ? count : static_cast<int32_t>(tokens.size());
    const std::string path = (dir_ / name).string();
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(header), sizeof header);
    f.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * 2));
    return path;
  }
  fs::path dir_;
};

// torchvision's find_classes sorts the folder names (Python compares code points: upper case
// before lower case, "a b" before "a_b"); make_dataset walks each class folder (os.walk,
// sorted by directory path, then file names) and keeps the files with an image extension in any
// case. "a-c" sorts before "a/..." because '-' (0x2d) < '/' (0x2f).
TEST_F(DataLayoutTest, ImageFolderIndexesAsTorchvision) {
  for (const char* f : {"b/2.jpg", "b/10.JPG", "b/notes.txt", "a/z.png", "a/sub/y.jpeg",
                        "a/sub/deeper/x.jpg", "a/a-c/w.jpg", "a/0.jpg", "B/q.PNG", "a b/k.jpg",
                        "a_b/m.webp", "a_b/n.jpg", "B/.hidden.jpg"})
    touch(f);
  auto idx = index_imagefolder(dir_.string());
  ASSERT_TRUE(idx.ok()) << idx.error().message();
  EXPECT_EQ(idx->classes, (std::vector<std::string>{"B", "a", "a b", "a_b", "b"}));
  std::vector<std::string> got;
  std::vector<int32_t> labels;
  for (const ImageEntry& e : idx->images) {
    got.push_back(rel(e.path));
    labels.push_back(e.label);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"B/.hidden.jpg", "B/q.PNG", "a/0.jpg", "a/z.png",
                                           "a/a-c/w.jpg", "a/sub/y.jpeg", "a/sub/deeper/x.jpg",
                                           "a b/k.jpg", "a_b/n.jpg", "b/10.JPG", "b/2.jpg"}));
  EXPECT_EQ(labels, (std::vector<int32_t>{0, 0, 1, 1, 1, 1, 1, 2, 3, 4, 4}));
  EXPECT_EQ(idx->per_class, (std::vector<int64_t>{2, 5, 1, 1, 2}));
  ASSERT_EQ(idx->unsupported.size(), 1u);
  EXPECT_EQ(rel(idx->unsupported[0]), "a_b/m.webp");
  ASSERT_EQ(idx->skipped.size(), 1u);
  EXPECT_EQ(rel(idx->skipped[0]), "b/notes.txt");
}

TEST_F(DataLayoutTest, TrainAndValFoldersAndTheirErrors) {
  touch("train/cat/1.jpg");
  touch("train/dog/1.jpg");
  touch("val/dog/2.jpg");
  EXPECT_EQ(imagefolder_train_root(dir_.string()), (dir_ / "train").string());
  EXPECT_EQ(imagefolder_val_root(dir_.string()), (dir_ / "val").string());
  auto train = index_imagefolder(imagefolder_train_root(dir_.string()));
  ASSERT_TRUE(train.ok());
  // val/ takes the training classes' indices, also where it lacks a class.
  auto val = index_imagefolder(imagefolder_val_root(dir_.string()), &train->classes);
  ASSERT_TRUE(val.ok()) << val.error().message();
  ASSERT_EQ(val->images.size(), 1u);
  EXPECT_EQ(val->images[0].label, 1);
  EXPECT_EQ(val->per_class, (std::vector<int64_t>{0, 1}));
  // A held-out class the training folder lacks.
  touch("val/cow/3.jpg");
  auto bad = index_imagefolder(imagefolder_val_root(dir_.string()), &train->classes);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("class folder 'cow' that the training images lack"),
            std::string::npos)
      << bad.error().message();
  // A training class without images; a folder without classes; no folder.
  fs::create_directories(dir_ / "train/empty");
  touch("train/empty/readme.txt");
  auto empty = index_imagefolder(imagefolder_train_root(dir_.string()));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message().find("holds no JPEG or PNG image"), std::string::npos);
  fs::create_directories(dir_ / "flat");
  touch("flat/1.jpg");
  auto flat = index_imagefolder((dir_ / "flat").string());
  ASSERT_FALSE(flat.ok());
  EXPECT_NE(flat.error().message().find("has no class folders"), std::string::npos);
  EXPECT_EQ(index_imagefolder((dir_ / "nope").string()).error().kind(), ErrorKind::kNotFound);
  // Without train/, DIR itself holds the classes and there is no val/.
  EXPECT_EQ(imagefolder_train_root((dir_ / "flat").string()), (dir_ / "flat").string());
  EXPECT_EQ(imagefolder_val_root((dir_ / "flat").string()), "");
}

TEST_F(DataLayoutTest, TokenShardsAreCheckedWithClearErrors) {
  std::vector<uint16_t> tokens(101);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i * 7);
  auto ok = read_token_shard(shard("good.bin", tokens));
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(ok->tokens, 101);
  auto magic = read_token_shard(shard("magic.bin", tokens, 12345));
  ASSERT_FALSE(magic.ok());
  EXPECT_NE(magic.error().message().find("has magic number 12345, not llm.c's 20240520"),
            std::string::npos)
      << magic.error().message();
  auto version = read_token_shard(shard("v2.bin", tokens, kTokenShardMagic, 2));
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.error().message().find("version 2 (uint32 LLaMA-3 tokens)"), std::string::npos)
      << version.error().message();
  auto truncated = read_token_shard(shard("short.bin", tokens, kTokenShardMagic, 1, 200));
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.error().message().find("its header says 200 tokens (1424 bytes): truncated"),
            std::string::npos)
      << truncated.error().message();
  auto trailing = read_token_shard(shard("long.bin", tokens, kTokenShardMagic, 1, 50));
  ASSERT_FALSE(trailing.ok());
  EXPECT_NE(trailing.error().message().find("trailing data"), std::string::npos);
  std::ofstream(dir_ / "tiny.bin") << "abc";
  auto tiny = read_token_shard((dir_ / "tiny.bin").string());
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.error().message().find("shorter than llm.c's 1024-byte header"),
            std::string::npos);
  auto none = glob_files((dir_ / "*.nothing").string());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("no file matches"), std::string::npos);
}

TEST_F(DataLayoutTest, TokenWindowsAndTheHeldOutSplit) {
  // 101 tokens give (101 - 1) / 10 = 10 windows of 10; 100 give 9.
  EXPECT_EQ(token_windows(101, 10), 10);
  EXPECT_EQ(token_windows(100, 10), 9);
  EXPECT_EQ(token_windows(10, 10), 0);
  const std::vector<TokenShard> shards = {{"a", 101}, {"b", 51}, {"c", 31}};  // 10 + 5 + 3
  auto last = split_tokens(shards, 10, true, 0);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->train_windows, 15);
  EXPECT_EQ(last->heldout_windows, 3);
  ASSERT_EQ(last->heldout.size(), 1u);
  EXPECT_EQ(last->heldout[0].shard, 2u);
  // A share: the last round(18 x 0.25) = 5 windows, across the shard boundary.
  auto share = split_tokens(shards, 10, false, 0.25);
  ASSERT_TRUE(share.ok());
  EXPECT_EQ(share->train_windows, 13);
  EXPECT_EQ(share->heldout_windows, 5);
  ASSERT_EQ(share->heldout.size(), 2u);
  EXPECT_EQ(share->heldout[0].shard, 1u);
  EXPECT_EQ(share->heldout[0].first, 3);
  EXPECT_EQ(share->heldout[0].count, 2);
  EXPECT_EQ(share->heldout[1].shard, 2u);
  EXPECT_EQ(share->heldout[1].count, 3);
  auto one = split_tokens({{"a", 101}}, 10, true, 0);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.error().message().find("needs at least two shards"), std::string::npos);
  auto starved = split_tokens({{"a", 101}}, 200, false, 0.1);
  ASSERT_FALSE(starved.ok());
  EXPECT_NE(starved.error().message().find("0 training and 0 held-out samples of 200"),
            std::string::npos)
      << starved.error().message();
}

// The recipe keys: classes from the folders, 3 x size x size, val/ held out by default (a share
// when asked); tokens: GPT-2's vocabulary, context 1024, the last shard held out by default.
TEST_F(DataLayoutTest, RecipesOfTheRealKinds) {
  touch("imgs/train/cat/1.jpg");
  touch("imgs/train/dog/1.jpg");
  touch("imgs/train/emu/1.jpg");
  touch("imgs/val/dog/2.jpg");
  const std::string base = dir_.string();
  ParseOutcome o = parse_recipe(
      "model: {layers: [{linear: {out: 3}}]}\ndata: {kind: imagefolder, path: imgs, size: 64}\n",
      "r.yaml", base);
  ASSERT_TRUE(o.ok()) << (o.problems.empty() ? "" : o.problems[0].to_string());
  EXPECT_EQ(o.recipe.data.classes, 3);
  EXPECT_EQ(o.recipe.data.shape, (Shape{3, 64, 64}));
  EXPECT_EQ(o.recipe.data.path, (dir_ / "imgs").string());
  EXPECT_TRUE(o.recipe.data.heldout_test_files);
  o = parse_recipe(
      "model: {layers: [{linear: {out: 3}}]}\n"
      "data: {kind: imagefolder, path: imgs, heldout: 0.2}\n",
      "r.yaml", base);
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o.recipe.data.heldout_test_files);
  EXPECT_DOUBLE_EQ(o.recipe.data.heldout_fraction, 0.2);
  EXPECT_EQ(o.recipe.data.shape, (Shape{3, 224, 224}));
  // A missing folder is the data path's problem; `size` is imagefolder's key only.
  o = parse_recipe("model: mlp\ndata: {kind: imagefolder, path: nowhere}\n", "r.yaml", base);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.problems[0].key, "data.path");
  EXPECT_NE(o.problems[0].message.find("is not a directory"), std::string::npos);
  o = parse_recipe("model: mlp\ndata: {kind: mnist, path: x, size: 32}\n", "r.yaml", base);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.problems[0].message.find("only imagefolder data takes 'size'"), std::string::npos);

  std::vector<uint16_t> tokens(4001, 7);
  shard("tok_train.bin", tokens);
  shard("tok_val.bin", tokens);
  o = parse_recipe(
      "model: {builtin: gpt-tiny}\ndata: {kind: tokens, path: 'tok_*.bin', context: 64}\n",
      "r.yaml", base);
  ASSERT_TRUE(o.ok()) << (o.problems.empty() ? "" : o.problems[0].to_string());
  EXPECT_EQ(o.recipe.data.classes, kGpt2Vocab);
  EXPECT_EQ(o.recipe.data.shape, (Shape{64}));
  EXPECT_TRUE(o.recipe.data.heldout_test_files);
  auto n = real_data_train_samples(o.recipe.data);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 4000 / 64);  // the first shard's windows
  // `heldout: val` with one shard.
  o = parse_recipe(
      "model: {builtin: gpt-tiny}\n"
      "data: {kind: tokens, path: tok_train.bin, context: 64, heldout: val}\n",
      "r.yaml", base);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.problems[0].key, "data.heldout");
  EXPECT_NE(o.problems[0].message.find("needs at least two shards"), std::string::npos);
}

}  // namespace
}  // namespace dltune::recipes
