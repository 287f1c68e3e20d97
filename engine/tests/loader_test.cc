// Datasets read on demand: the BatchLoader's batches (the same for any number of loader threads
// and prefetch depth, sharded over ranks as the Sampler shards, errors naming the file and the
// step), image folders split into training and held-out images, llm.c token shards read as
// windows with next-token targets.
#include "engine/data/loader.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "engine/data/image_decode.h"
#include "engine/data/real_data.h"

namespace dltune::engine {
namespace {

namespace fs = std::filesystem;

fs::path fixtures() { return fs::path(DLTUNE_ENGINE_SOURCE_DIR) / "engine/tests/data/images"; }

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dltune-loader-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // An image folder of the fixtures: three classes of four images each (JPEG and PNG).
  bool make_folder() {
    if (!jpeg_decoding_available() || !png_decoding_available()) return false;
    const std::vector<std::string> files = {"rgb444.jpg", "rgb420.jpg", "progressive.jpg",
                                            "gray.jpg",   "cmyk.jpg",   "rgb.png",
                                            "rgba.png",   "luma.png",   "palette.png"};
    for (int i = 0; i < 12; ++i) {
      const fs::path to =
          dir_ / ("class" + std::to_string(i % 3)) /
          (std::to_string(i) + fs::path(files[i % files.size()]).extension().string());
      fs::create_directories(to.parent_path());
      fs::copy_file(fixtures() / files[i % files.size()], to);
    }
    return true;
  }
  fs::path dir_;
};

// Every step's batch, read with `threads` loader threads `depth` batches ahead.
std::vector<std::vector<float>> batches(const Dataset& d, int threads, int depth, uint64_t seed,
                                        int steps, std::vector<int32_t>* labels = nullptr) {
  auto sampler = Sampler::create(d.size, 4, 1, 0, seed);
  EXPECT_TRUE(sampler.ok());
  LoaderOptions o;
  o.threads = threads;
  o.depth = depth;
  o.seed = seed;
  BatchLoader loader(d, *sampler, o);
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; ++s) {
    std::vector<float> x(static_cast<size_t>(4 * d.sample_numel()));
    std::vector<int32_t> y(4);
    EXPECT_TRUE(loader.next(s, x.data(), y.data()).ok());
    out.push_back(std::move(x));
    if (labels) labels->insert(labels->end(), y.begin(), y.end());
  }
  return out;
}

TEST_F(LoaderTest, SameBatchesForAnyThreadsAndDepth) {
  if (!make_folder()) GTEST_SKIP() << "a build without a JPEG or PNG decoder";
  auto d = load_imagefolder(dir_.string(), true, {3, 24, 24}, 0.25, 5);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->size, 9);  // 12 less round(12 x 0.25)
  EXPECT_EQ(d->classes, 3);
  // Six steps: over two epochs (two batches of 4 per epoch of 9), so reshuffled once.
  std::vector<int32_t> labels1;
  const auto one = batches(*d, 1, 1, 11, 6, &labels1);
  for (auto [threads, depth] : {std::pair{2, 2}, {4, 3}, {3, 8}}) {
    std::vector<int32_t> labels;
    EXPECT_EQ(batches(*d, threads, depth, 11, 6, &labels), one) << threads << " threads";
    EXPECT_EQ(labels, labels1);
  }
  // Another seed: another order and other crops.
  EXPECT_NE(batches(*d, 2, 2, 12, 6), one);
  // Out of order (a resumed run): the same batch as in order.
  auto sampler = Sampler::create(d->size, 4, 1, 0, 11);
  LoaderOptions o;
  o.seed = 11;
  BatchLoader loader(*d, *sampler, o);
  std::vector<float> x(one[4].size());
  std::vector<int32_t> y(4);
  ASSERT_TRUE(loader.next(4, x.data(), y.data()).ok());
  EXPECT_EQ(x, one[4]);
  ASSERT_TRUE(loader.next(1, x.data(), y.data()).ok());
  EXPECT_EQ(x, one[1]);
}

// Two ranks' batches are the two slices of the one-rank global batch.
TEST_F(LoaderTest, ShardedOverRanksAsTheSampler) {
  if (!make_folder()) GTEST_SKIP() << "a build without a JPEG or PNG decoder";
  auto d = load_imagefolder(dir_.string(), true, {3, 16, 16}, 0.25, 5);
  ASSERT_TRUE(d.ok());
  const auto whole = batches(*d, 2, 2, 3, 2);
  const size_t per = static_cast<size_t>(d->sample_numel());
  for (int rank = 0; rank < 2; ++rank) {
    auto sampler = Sampler::create(d->size, 4, 2, rank, 3);
    LoaderOptions o;
    o.seed = 3;
    o.labels = false;
    BatchLoader loader(*d, *sampler, o);
    for (int s = 0; s < 2; ++s) {
      std::vector<float> x(2 * per);
      ASSERT_TRUE(loader.next(s, x.data(), nullptr).ok());
      EXPECT_TRUE(std::equal(
          x.begin(), x.end(),
          whole[static_cast<size_t>(s)].begin() + static_cast<std::ptrdiff_t>(2 * rank * per)));
    }
  }
}

TEST_F(LoaderTest, HeldOutImagesAreTheOtherOnesUnaugmented) {
  if (!make_folder()) GTEST_SKIP() << "a build without a JPEG or PNG decoder";
  auto train = load_imagefolder(dir_.string(), true, {3, 16, 16}, 0.25, 5);
  auto held = load_imagefolder(dir_.string(), false, {3, 16, 16}, 0.25, 5);
  ASSERT_TRUE(train.ok() && held.ok());
  EXPECT_EQ(held->size, 3);
  std::set<std::string> seen;
  for (const auto* d : {&*train, &*held})
    for (const auto& e : static_cast<const ImageFolderReader&>(*d->reader).images())
      EXPECT_TRUE(seen.insert(e.path).second) << e.path << " on both sides";
  EXPECT_EQ(seen.size(), 12u);
  // Evaluation reads do not depend on the seed; the loader reads them as read_samples does.
  std::vector<float> a(3 * 768), b(3 * 768);
  std::vector<int32_t> ya(3), yb(3);
  ASSERT_TRUE(read_samples(*held, 0, 3, a.data(), ya.data()).ok());
  auto sampler = Sampler::create(train->size, 4, 1, 0, 1);
  BatchLoader loader(*train, *sampler, {});
  ASSERT_TRUE(loader.read(*held, 0, 3, b.data(), yb.data()).ok());
  EXPECT_EQ(a, b);
  EXPECT_EQ(ya, yb);
  float x[768];
  ASSERT_TRUE(held->reader->read(1, 999, x, nullptr).ok());
  EXPECT_EQ(std::memcmp(x, a.data() + 768, sizeof x), 0);
  // With train/ and val/: val/ is the held-out set; without val/, a share is needed.
  EXPECT_FALSE(load_imagefolder(dir_.string(), false, {3, 16, 16}, 0.0, 5).ok());
  EXPECT_FALSE(load_imagefolder(dir_.string(), true, {1, 16, 16}, 0.25, 5).ok());
}

TEST_F(LoaderTest, ABadImageStopsTheStepNamingTheFile) {
  if (!make_folder()) GTEST_SKIP() << "a build without a JPEG or PNG decoder";
  std::ofstream(dir_ / "class1" / "broken.jpg") << "this is not a JPEG";
  auto d = load_imagefolder(dir_.string(), true, {3, 16, 16}, 0.1, 5);
  ASSERT_TRUE(d.ok());
  auto sampler = Sampler::create(d->size, d->size, 1, 0, 1);  // every image in step 0
  BatchLoader loader(*d, *sampler, {});
  std::vector<float> x(static_cast<size_t>(d->size * d->sample_numel()));
  std::vector<int32_t> y(static_cast<size_t>(d->size));
  Status st = loader.next(0, x.data(), y.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("reading the batch of step 0"), std::string::npos);
  EXPECT_NE(st.error().message().find("broken.jpg': neither JPEG nor PNG data"), std::string::npos)
      << st.error().message();
  // Formats dltune does not read are refused up front.
  std::ofstream(dir_ / "class2" / "x.webp") << "RIFF";
  auto webp = load_imagefolder(dir_.string(), true, {3, 16, 16}, 0.1, 5);
  ASSERT_FALSE(webp.ok());
  EXPECT_NE(webp.error().message().find("format dltune does not read (first: '"), std::string::npos)
      << webp.error().message();
}

// An llm.c shard written here: windows of T tokens and their next tokens, the held-out split,
// ids beyond GPT-2's vocabulary.
TEST_F(LoaderTest, TokenShardsReadAsWindows) {
  auto write = [&](const std::string& name, const std::vector<uint16_t>& tokens) {
    int32_t header[256] = {20240520, 1, static_cast<int32_t>(tokens.size())};
    std::ofstream f(dir_ / name, std::ios::binary);
    f.write(reinterpret_cast<const char*>(header), sizeof header);
    f.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(2 * tokens.size()));
  };
  std::vector<uint16_t> a(81), b(41);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint16_t>(1000 + i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint16_t>(50000 + i);
  write("s_train.bin", a);  // 10 windows of 8
  write("s_val.bin", b);    // 5 windows of 8
  const std::string glob = (dir_ / "s_*.bin").string();
  auto train = load_tokens(glob, true, {8}, 0.0);  // held out: the last shard (val sorts last)
  auto held = load_tokens(glob, false, {8}, 0.0);
  ASSERT_TRUE(train.ok()) << train.error().message();
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(train->size, 10);
  EXPECT_EQ(held->size, 5);
  EXPECT_EQ(train->label_width, 8);
  EXPECT_EQ(train->classes, 50257);
  float x[8];
  int32_t y[8];
  ASSERT_TRUE(train->reader->read(3, 0, x, y).ok());
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(x[t], 1000 + 24 + t);
    EXPECT_EQ(y[t], 1000 + 24 + t + 1);
  }
  ASSERT_TRUE(held->reader->read(4, 0, x, y).ok());
  EXPECT_EQ(x[0], 50000 + 32);
  EXPECT_EQ(y[7], 50000 + 40);
  // A share instead: the last round(15 x 0.2) = 3 windows, the rest trained on.
  auto share = load_tokens(glob, false, {8}, 0.2);
  ASSERT_TRUE(share.ok());
  EXPECT_EQ(share->size, 3);
  ASSERT_TRUE(share->reader->read(0, 0, x, y).ok());
  EXPECT_EQ(x[0], 50000 + 16);
  // A token id GPT-2 does not have.
  b[20] = 60000;
  write("s_val.bin", b);
  auto bad = load_tokens(glob, false, {8}, 0.0);
  ASSERT_TRUE(bad.ok());
  Status st = bad->reader->read(2, 0, x, y);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("holds token id 60000 at token 20, beyond GPT-2's"),
            std::string::npos)
      << st.error().message();
  // A truncated shard is refused when loading.
  fs::resize_file(dir_ / "s_val.bin", 1024 + 2 * 30);
  auto cut = load_tokens(glob, true, {8}, 0.0);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message().find("truncated"), std::string::npos) << cut.error().message();
}

}  // namespace
}  // namespace dltune::engine
