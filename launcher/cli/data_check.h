// `dltune data check RECIPE`: whether the data a recipe reads is there and whole, before a
// launch finds out. File-backed kinds (mnist, cifar10) are checked against their published
// form (recipes/datasets.h): every file present, its size, its header (IDX magic numbers and
// dimensions, CIFAR-10's record layout) and its labels in range; archives found beside the
// files (train-images-idx3-ubyte.gz, cifar-10-binary.tar.gz) are checked against the MD5 sums
// their publishers list. Text data: the file, its size against the context, its samples and
// its byte entropy. Image folders (data_check_real.cc): every image read and decoded (on all
// cores), counts per class, the files that cannot be read or are not images, the images smaller
// than the model's crops. Token shards: every shard's header and size, its token ids within
// GPT-2's vocabulary, the samples each part gives. Synthetic kinds need no files.
#pragma once

#include <string>
#include <vector>

#include "recipes/recipe.h"

namespace dltune::launcher {

struct FileCheck {
  std::string name;  // "train-images-idx3-ubyte"
  std::string path;
  bool ok = false;
  std::string detail;  // what was found ("60000 images of 28 x 28, labels 0-9") or what is wrong
  bool warn = false;   // ok, but worth a look (an image smaller than the crops)
};

struct DataCheck {
  std::string kind;     // "mnist"
  std::string path;     // data.path ("" for synthetic)
  bool ok = false;      // every file ok (and every archive found matches its sum)
  std::string summary;  // one line: "MNIST: 4 files ok" / "synthetic: generated, nothing to fetch"
  std::string fetch;    // when a file is missing or wrong: what to fetch and where (else "")
  std::vector<FileCheck> files;
};

// Checks the data `data` describes. Never fails: problems are in the result.
DataCheck check_data(const recipes::DataConfig& data);

// Checks one IDX file (MNIST): `images` true for idx3 images (magic 0x00000803, N x 28 x 28),
// else idx1 labels (0x00000801, N labels in 0-9). `expect_bytes` 0: any size. For tests.
FileCheck check_idx(const std::string& path, bool images, uint64_t expect_bytes);
// Checks one CIFAR-10 binary batch: records of 1 label byte (0-9) + 3072 pixel bytes.
FileCheck check_cifar_batch(const std::string& path, uint64_t expect_bytes);
// imagefolder and tokens data (data_check_real.cc); check_data() calls them.
DataCheck check_imagefolder(const recipes::DataConfig& data);
DataCheck check_tokens(const recipes::DataConfig& data);

}  // namespace dltune::launcher
