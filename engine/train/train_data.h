// The datasets a TrainConfig trains and evaluates on.
#pragma once

#include <cstdint>

#include "common/result.h"
#include "engine/data/dataset.h"
#include "engine/train/train_config.h"

namespace dltune::engine {

// Loads the training set of `c` (at most `train_size` samples of synthetic data: the config's
// train_size when < 0) and, when `heldout` is not null, its held-out set: the synthetic
// held-out set, a share split off the training files (mnist / cifar10 with heldout_split), the
// test files, or the last share of a text file. Shapes come from the config's model graph
// (synthetic-imagenet's image shape, text's context). Errors: the data readers', naming the
// source.
Status load_train_data(const TrainConfig& c, Dataset* train, Dataset* heldout,
                       int64_t train_size = -1);

}  // namespace dltune::engine
