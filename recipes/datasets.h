// Where the files of the file-backed data kinds come from (mnist, cifar10): their names and
// sizes, where to fetch them, the archives' published checksums, and how to put them in place.
// One table, read by the recipe checks (a missing dataset's error says what to fetch and where
// to put it), by `dltune data check` (which verifies the files against it) and documented in
// recipes/README.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
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

// The samples held out of `size` for a share `fraction` (rounded to the nearest whole sample).
int64_t heldout_count(int64_t size, double fraction);

// Training samples `recipe`'s data yields: synthetic, its samples minus the held-out share;
// text, the windows of the file's training part; mnist / cifar10, read from the training
// files' headers and sizes, minus the held-out share unless `heldout: test`. The one count the
// tuner, the launcher and the ranks use (an epoch's steps follow from it). Errors (io_error,
// naming the file): data files that cannot be read.
Result<int64_t> train_samples(const Recipe& recipe);

// The run's length in steps at `global_batch` samples per step: training.steps, else epochs x
// ceil(train samples / global batch). Errors: as train_samples(); invalid_input when the data
// has no training sample or global_batch < 1.
Result<int64_t> training_steps(const Recipe& recipe, int64_t global_batch);

// Steps between checkpoints of a run of `steps` steps: training.checkpoint_every when the
// recipe sets it, else a quarter of the run (at least 1), so that a stopped run loses at most
// a quarter of its work.
int64_t checkpoint_interval(const Recipe& recipe, int64_t steps);

}  // namespace dltune::recipes
