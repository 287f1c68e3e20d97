// Where the files of the file-backed data kinds come from (mnist, cifar10): their names and
// sizes, where to fetch them, the archives' published checksums, and how to put them in place.
// One table, read by the recipe checks (a missing dataset's error says what to fetch and where
// to put it), by `dltune data check` (which verifies the files against it) and documented in
// recipes/README.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recipes/recipe.h"

namespace dltune::recipes {

struct DatasetFile {
  std::string name;  // "train-images-idx3-ubyte"
  uint64_t bytes = 0;
  bool test = false;  // needed only with `heldout: test`
};

struct DatasetArchive {
  std::string name;  // "train-images-idx3-ubyte.gz"
  std::string md5;   // as its publisher lists it
};

struct DatasetSource {
  DataKind kind;
  std::string title;  // "MNIST"
  std::string url;    // where the archives are published
  std::vector<DatasetArchive> archives;
  std::vector<DatasetFile> files;  // what data.path must hold, uncompressed
};

// The source of `kind`; nullptr for kinds that need no files (synthetic) or that take any file
// (text).
const DatasetSource* dataset_source(DataKind kind);

// The files `data` needs in its path (the test files only with heldout: test).
std::vector<DatasetFile> dataset_files(const DataConfig& data);

// The end of the sentence for a missing or incomplete dataset: what to fetch, from where, and
// how to put it in `dir` ("fetch MNIST (train-images-idx3-ubyte.gz, ...) from https://... and
// gunzip them into DIR; recipes/README.md lists the checksums, and `dltune data check` verifies
// the files"); "" for kinds without a source.
std::string dataset_fetch_hint(DataKind kind, const std::string& dir);

}  // namespace dltune::recipes
