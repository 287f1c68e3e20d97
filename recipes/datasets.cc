#include "recipes/datasets.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "common/strings.h"
#include "recipes/data_layout.h"

namespace dltune::recipes {
namespace {

// MNIST (LeCun, Cortes and Burges): the IDX files as torchvision fetches them (its mirror of
// yann.lecun.com/exdb/mnist, with the archives' MD5 sums torchvision checks).
const DatasetSource kMnist = {DataKind::kMnist,
                              "MNIST",
                              "https://ossci-datasets.s3.amazonaws.com/mnist/",
                              {{"train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"},
                               {"train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"},
                               {"t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"},
                               {"t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"}},
                              {{"train-images-idx3-ubyte", 47040016, false},
                               {"train-labels-idx1-ubyte", 60008, false},
                               {"t10k-images-idx3-ubyte", 7840016, true},
                               {"t10k-labels-idx1-ubyte", 10008, true}}};

// CIFAR-10 (Krizhevsky 2009), binary version: 5 training batches and a test batch of 10000
// records of 1 label byte + 3072 pixel bytes.
const DatasetSource kCifar10 = {DataKind::kCifar10,
                                "CIFAR-10 (binary version)",
                                "https://www.cs.toronto.edu/~kriz/cifar.html",
                                {{"cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530"}},
                                {{"data_batch_1.bin", 30730000, false},
                                 {"data_batch_2.bin", 30730000, false},
                                 {"data_batch_3.bin", 30730000, false},
                                 {"data_batch_4.bin", 30730000, false},
                                 {"data_batch_5.bin", 30730000, false},
                                 {"test_batch.bin", 30730000, true}}};

Result<int64_t> file_size(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return io_error("cannot read data file '" + path + "'");
  return static_cast<int64_t>(f.tellg());
}

// Samples in the training files of mnist / cifar10 data, from their headers and sizes.
Result<int64_t> training_file_samples(const DataConfig& d) {
  if (d.kind == DataKind::kMnist) {
    const std::string path = d.path + "/train-images-idx3-ubyte";
    std::ifstream f(path, std::ios::binary);
    unsigned char h[8];
    if (!f || !f.read(reinterpret_cast<char*>(h), sizeof h))
      return io_error("cannot read the header of MNIST file '" + path + "'");
    return (int64_t{h[4]} << 24) | (int64_t{h[5]} << 16) | (int64_t{h[6]} << 8) | h[7];
  }
  int64_t n = 0;
  for (int i = 1; i <= 5; ++i) {
    auto size = file_size(d.path + "/data_batch_" + std::to_string(i) + ".bin");
    if (!size) return size.error();
    n += *size / 3073;
  }
  return n;
}

}  // namespace

int64_t heldout_count(int64_t size, double fraction) {
  return static_cast<int64_t>(std::llround(static_cast<double>(size) * fraction));
}

Result<int64_t> train_samples(const Recipe& recipe) {
  const DataConfig& d = recipe.data;
  switch (d.kind) {
    case DataKind::kSyntheticDigits:
    case DataKind::kSyntheticImagenet:
    case DataKind::kSyntheticCifar:
      return d.samples - heldout_count(d.samples, d.heldout_fraction);
    case DataKind::kText: {
      auto size = file_size(d.path);
      if (!size) return size.error();
      // The windows of the file's training part (engine/data/dataset.h read_text).
      return text_windows(*size - text_heldout_bytes(*size, d.heldout_fraction), d.context);
    }
    case DataKind::kMnist:
    case DataKind::kCifar10: {
      auto n = training_file_samples(d);
      if (!n) return n.error();
      // The share held out is split off the training files unless the test files are the
      // held-out set.
      return d.heldout_test_files ? *n : *n - heldout_count(*n, d.heldout_fraction);
    }
    case DataKind::kImageFolder:
    case DataKind::kTokens:
      return real_data_train_samples(d);
  }
  return internal_error("unknown data kind");
}

Result<int64_t> training_steps(const Recipe& recipe, int64_t global_batch) {
  if (recipe.training.steps > 0) return recipe.training.steps;
  if (global_batch < 1) return invalid_input("a global batch of " + std::to_string(global_batch));
  auto n = train_samples(recipe);
  if (!n) return n.error();
  if (*n < 1) return invalid_input("recipe '" + recipe.name + "': data: has no training samples");
  return recipe.training.epochs * ((*n + global_batch - 1) / global_batch);
}

int64_t checkpoint_interval(const Recipe& recipe, int64_t steps) {
  if (recipe.training.checkpoint_every > 0) return recipe.training.checkpoint_every;
  return std::max<int64_t>(1, steps / 4);
}

const DatasetSource* dataset_source(DataKind kind) {
  if (kind == DataKind::kMnist) return &kMnist;
  if (kind == DataKind::kCifar10) return &kCifar10;
  return nullptr;
}

std::vector<DatasetFile> dataset_files(const DataConfig& data) {
  std::vector<DatasetFile> out;
  const DatasetSource* s = dataset_source(data.kind);
  if (s == nullptr) return out;
  for (const DatasetFile& f : s->files) {
    if (!f.test || data.heldout_test_files) out.push_back(f);
  }
  return out;
}

std::string dataset_fetch_hint(DataKind kind, const std::string& dir) {
  const DatasetSource* s = dataset_source(kind);
  if (s == nullptr) return "";
  std::vector<std::string> archives;
  for (const DatasetArchive& a : s->archives) archives.push_back(a.name);
  const std::string where = kind == DataKind::kMnist
                                ? "gunzip them into " + dir
                                : "extract it into " + dir + " (tar xzf " + archives.front() +
                                      " --strip-components=1 -C " + dir + ")";
  return "fetch " + s->title + " (" + strings::join(archives, ", ") + ") from " + s->url + " and " +
         where +
         "; recipes/README.md lists the checksums, and `dltune data check` "
         "verifies the files";
}

}  // namespace dltune::recipes
