// Data: MNIST IDX and CIFAR-10 readers on small files written here (good and bad), the
// synthetic digits, and per-rank sharding.
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/paths.h"
#include "engine/data/dataset.h"
#include "engine/data/sampler.h"

namespace dltune::engine {
namespace {

class DataFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dltune-engine-data-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string write(const std::string& name, const std::string& data) {
    std::string p = dir_ + "/" + name;
    EXPECT_TRUE(paths::write_file_atomic(p, data).ok());
    return p;
  }
  std::string dir_;
};

std::vector<uint8_t> pixels(int n) {
  std::vector<uint8_t> px(n * 4 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7);
  return px;
}

TEST_F(DataFiles, MnistRoundTrip) {
  auto img = write("img", encode_mnist_images(pixels(3), 3, 4, 3));
  auto lab = write("lab", encode_mnist_labels({7, 0, 9}));
  auto d = read_mnist(img, lab);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->size, 3);
  EXPECT_EQ(d->shape, (recipes::Shape{1, 4, 3}));
  EXPECT_EQ(d->labels, (std::vector<int32_t>{7, 0, 9}));
  EXPECT_NEAR(d->images[1], (7 / 255.0f - 0.1307f) / 0.3081f, 1e-5);
}

TEST_F(DataFiles, MnistBadFiles) {
  auto img = write("img", encode_mnist_images(pixels(3), 3, 4, 3));
  auto lab = write("lab", encode_mnist_labels({7, 0, 9}));
  struct Case {
    std::string img, lab, expect;
  } cases[] = {
      {lab, lab, "magic number 0x00000801, expected 0x00000803"},
      {img, img, "magic number 0x00000803, expected 0x00000801"},
      {write("trunc", encode_mnist_images(pixels(3), 3, 4, 3).substr(0, 40)), lab, "truncated"},
      {write("short", "\x00\x00\x08"), lab, "shorter than its 16-byte header"},
      {img, write("badlab", encode_mnist_labels({7, 10, 9})), "label 10 of sample 1"},
      {img, write("fewlab", encode_mnist_labels({7, 1})), "holds 2 labels"},
      {img, dir_ + "/missing", "missing"},
  };
  for (const auto& c : cases) {
    auto d = read_mnist(c.img, c.lab);
    ASSERT_FALSE(d.ok()) << c.expect;
    EXPECT_NE(d.error().message().find(c.expect), std::string::npos) << d.error().message();
  }
}

std::string cifar_record(int label) {
  std::string r(1, static_cast<char>(label));
  for (int i = 0; i < 3072; ++i) r.push_back(static_cast<char>(i % 251));
  return r;
}

TEST_F(DataFiles, Cifar10GoodAndBad) {
  auto good = write("b1", cifar_record(3) + cifar_record(9));
  auto d = read_cifar10({good, good});
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->size, 4);
  EXPECT_EQ(d->labels, (std::vector<int32_t>{3, 9, 3, 9}));
  EXPECT_EQ(d->images.size(), 4u * 3072);

  auto trunc = write("t", cifar_record(1) + cifar_record(2).substr(0, 100));
  auto r = read_cifar10({trunc});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("not a whole number of 3073-byte records"), std::string::npos);
  r = read_cifar10({write("l", cifar_record(1) + cifar_record(12))});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("label 12 of record 1 is out of range"), std::string::npos);
  r = read_cifar10({write("e", "")});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("is empty"), std::string::npos);
}

TEST(Synthetic, DeterministicAndBalanced) {
  Dataset a = synthetic_digits(500, 7), b = synthetic_digits(500, 7), c = synthetic_digits(500, 8);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.images, c.images);
  std::vector<int> hist(10);
  for (int y : a.labels) hist[y]++;
  for (int h : hist) EXPECT_GT(h, 25);  // every class present
  // A prefix of a larger set is the smaller set.
  Dataset big = synthetic_digits(600, 7);
  EXPECT_TRUE(std::equal(a.images.begin(), a.images.end(), big.images.begin()));
}

// Issue 42: synthetic-imagenet was uniform noise under random labels, so nothing trained on it
// could learn (AlexNet's bundled run sat at ln 1000). A classifier that knows nothing of how the
// images are made, nearest class mean (the training set's per-class mean image, squared
// distance), must now label held-out images far above chance; on the noise it could not.
TEST(Synthetic, ImagenetShapedImagesAreLearnable) {
  const recipes::Shape shape{3, 20, 24};
  const int classes = 6;
  const Dataset train = synthetic_images(600, shape, classes, 11);
  const Dataset held = synthetic_images(300, shape, classes, 12);
  const auto sz = static_cast<size_t>(recipes::numel(shape));
  for (float x : train.images) ASSERT_TRUE(x >= -1.0f && x < 1.0f);
  std::vector<std::vector<double>> mean(classes, std::vector<double>(sz, 0.0));
  std::vector<int> count(classes, 0);
  for (int64_t i = 0; i < train.size; ++i) {
    const int y = train.labels[static_cast<size_t>(i)];
    ++count[y];
    for (size_t p = 0; p < sz; ++p) mean[y][p] += train.images[static_cast<size_t>(i) * sz + p];
  }
  for (int c = 0; c < classes; ++c) {
    ASSERT_GT(count[c], 50);
    for (double& m : mean[c]) m /= count[c];
  }
  int right = 0;
  for (int64_t i = 0; i < held.size; ++i) {
    int best = -1;
    double best_d = 0;
    for (int c = 0; c < classes; ++c) {
      double d = 0;
      for (size_t p = 0; p < sz; ++p) {
        const double e = held.images[static_cast<size_t>(i) * sz + p] - mean[c][p];
        d += e * e;
      }
      if (best < 0 || d < best_d) best = c, best_d = d;
    }
    right += best == held.labels[static_cast<size_t>(i)];
  }
  EXPECT_GT(right, 270) << right << " of 300 (chance: 50)";
  // Different seeds give different images; the same seed the same.
  EXPECT_EQ(synthetic_images(600, shape, classes, 11).images, train.images);
  EXPECT_NE(held.images, std::vector<float>(train.images.begin(), train.images.begin() + 300 * sz));
}

TEST(Sampler, ShardsCoverTheGlobalBatchWithRemainders) {
  const int G = 10, P = 3;
  std::vector<int64_t> all, mine;
  std::multiset<int64_t> seen;
  auto s0 = Sampler::create(100, G, P, 0, 5);
  ASSERT_TRUE(s0.ok());
  s0->global_indices(12, all);
  int total = 0;
  for (int r = 0; r < P; ++r) {
    auto s = Sampler::create(100, G, P, r, 5);
    s->indices(12, mine);
    EXPECT_EQ(static_cast<int>(mine.size()), r == 0 ? 4 : 3);
    for (size_t i = 0; i < mine.size(); ++i) EXPECT_EQ(mine[i], all[s->offset(r) + i]);
    total += static_cast<int>(mine.size());
  }
  EXPECT_EQ(total, G);
  // One epoch (10 steps) visits every sample exactly once; the next epoch reshuffles.
  for (int step = 0; step < 10; ++step) {
    s0->global_indices(step, all);
    seen.insert(all.begin(), all.end());
  }
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 100u);
  std::vector<int64_t> e0, e1;
  s0->global_indices(0, e0);
  s0->global_indices(10, e1);
  EXPECT_NE(e0, e1);
}

TEST(Sampler, RejectsImpossibleBatches) {
  EXPECT_FALSE(Sampler::create(100, 2, 3, 0, 1).ok());
  EXPECT_FALSE(Sampler::create(10, 11, 1, 0, 1).ok());
  EXPECT_FALSE(Sampler::create(10, 4, 2, 2, 1).ok());
}

TEST(Datasets, SplitHeldoutIsASeededPartition) {
  const Dataset whole = synthetic_digits(200, 5);
  Dataset train = whole;
  auto held = split_heldout(train, heldout_count(whole.size, 0.1), 9);
  ASSERT_TRUE(held.ok()) << held.error().message();
  EXPECT_EQ(held->size, 20);
  EXPECT_EQ(train.size, 180);
  EXPECT_EQ(held->images.size(), size_t{20} * 784);
  EXPECT_EQ(train.images.size(), size_t{180} * 784);
  // Every sample lands on exactly one side, the training side in its original order.
  auto index_of = [&](const float* img) -> int64_t {
    for (int64_t i = 0; i < whole.size; ++i)
      if (std::memcmp(img, whole.image(i), sizeof(float) * 784) == 0) return i;
    return -1;
  };
  std::vector<int> seen(200, 0);
  int64_t last = -1;
  for (int64_t i = 0; i < train.size; ++i) {
    const int64_t k = index_of(train.image(i));
    ASSERT_GT(k, last) << "training sample " << i << " out of order";
    EXPECT_EQ(train.labels[static_cast<size_t>(i)], whole.labels[static_cast<size_t>(k)]);
    last = k;
    ++seen[static_cast<size_t>(k)];
  }
  for (int64_t i = 0; i < held->size; ++i) {
    const int64_t k = index_of(held->image(i));
    ASSERT_GE(k, 0);
    EXPECT_EQ(held->labels[static_cast<size_t>(i)], whole.labels[static_cast<size_t>(k)]);
    ++seen[static_cast<size_t>(k)];
  }
  for (int s : seen) EXPECT_EQ(s, 1);
  // Deterministic for a seed, different for another; not simply the last samples.
  Dataset again = whole, other = whole;
  auto held_again = split_heldout(again, 20, 9);
  auto held_other = split_heldout(other, 20, 10);
  EXPECT_EQ(held_again->images, held->images);
  EXPECT_NE(held_other->images, held->images);
  EXPECT_NE(held->images, std::vector<float>(whole.images.end() - 20 * 784, whole.images.end()));
  // Nothing left on a side: a clear error, the dataset untouched.
  for (int64_t bad : {int64_t{0}, int64_t{200}, int64_t{-1}}) {
    Dataset d = whole;
    auto r = split_heldout(d, bad, 9);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(r.error().message().find("at least 1 must stay"), std::string::npos);
    EXPECT_EQ(d.size, 200);
  }
}

TEST(Datasets, LoadByName) {
  auto d = load_dataset("synthetic", false, 50, 3);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->size, 50);
  auto bad = load_dataset("imagenet:/x", true, 50, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find(
                "mnist:DIR, cifar10:DIR, text:FILE, imagefolder:DIR or tokens:GLOB"),
            std::string::npos);
  auto missing = load_dataset("mnist:/nonexistent", true, 50, 3);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("/nonexistent/train-images-idx3-ubyte"),
            std::string::npos);
}

// Byte-level language modelling: windows of `context` bytes labelled with the next byte at
// each position; the held-out part is the file's tail and never overlaps a training window.
TEST(Datasets, TextWindowsAndTheirNextBytes) {
  char tmpl[] = "/tmp/dltune-text-XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  std::string text;
  for (int i = 0; i < 1000; ++i) text.push_back(static_cast<char>('a' + (i * 7) % 26));
  ASSERT_TRUE(paths::write_file_atomic(tmpl, text).ok());
  auto train = read_text(tmpl, 32, 0.1, true);
  auto held = read_text(tmpl, 32, 0.1, false);
  ASSERT_TRUE(train.ok() && held.ok()) << (train.ok() ? held.error() : train.error()).message();
  EXPECT_EQ(train->shape, (recipes::Shape{32}));
  EXPECT_EQ(train->label_width, 32);
  EXPECT_EQ(train->classes, 256);
  // 900 training bytes, windows of 33 bytes every 2: (900 - 33) / 2 + 1.
  EXPECT_EQ(train->size, (900 - 33) / 2 + 1);
  for (int64_t i : {int64_t{0}, int64_t{17}, train->size - 1}) {
    const float* x = train->image(i);
    const int32_t* y = train->label(i);
    for (int t = 0; t < 32; ++t) {
      ASSERT_EQ(static_cast<char>(x[t]), text[static_cast<size_t>(2 * i + t)]);
      ASSERT_EQ(static_cast<char>(y[t]), text[static_cast<size_t>(2 * i + t + 1)]);
    }
  }
  // The last training window ends before the held-out part starts.
  EXPECT_LE(2 * (train->size - 1) + 33, 900);
  EXPECT_EQ(static_cast<char>(held->image(0)[0]), text[900]);
  auto entropy = unigram_entropy_bits(tmpl);
  ASSERT_TRUE(entropy.ok());
  EXPECT_NEAR(*entropy, std::log2(26.0), 0.01);  // 26 letters, nearly uniform
  auto short_part = read_text(tmpl, 200, 0.1, false);
  ASSERT_FALSE(short_part.ok());
  EXPECT_NE(short_part.error().message().find("fewer than one sample"), std::string::npos);
  unlink(tmpl);
}

TEST(Datasets, SyntheticCifarIsDeterministicAndBalanced) {
  Dataset a = synthetic_cifar(500, 4), b = synthetic_cifar(500, 4), c = synthetic_cifar(500, 5);
  EXPECT_EQ(a.shape, (recipes::Shape{3, 32, 32}));
  EXPECT_EQ(a.images, b.images);
  EXPECT_NE(a.images, c.images);
  std::vector<int> per_class(10);
  for (int32_t y : a.labels) ++per_class[static_cast<size_t>(y)];
  for (int n : per_class) EXPECT_GT(n, 25);
  // Normalised with CIFAR-10's statistics: roughly centred.
  double mean = 0;
  for (float v : a.images) mean += v;
  EXPECT_LT(std::abs(mean / static_cast<double>(a.images.size())), 0.7);
}

}  // namespace
}  // namespace dltune::engine
