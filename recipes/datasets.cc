#include "recipes/datasets.h"

#include "common/strings.h"

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

}  // namespace

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
