// The built-in model definitions.
//
//   mlp      (1, 28, 28) -> 784-512-256-10, ReLU                          535,818 params
//   lenet    the Caffe LeNet (fixtures/models/caffe_lenet.prototxt)        431,080 params
//   lenet5   the classic 6/16/120/84/10 (ReLU, max pooling, conv1 pad 2)    61,706 params
//   alexnet  the Caffe BVLC AlexNet with grouped convs and LRN          60,965,224 params
//   cifar    a small CIFAR-10 CNN: 3x (conv5 + ReLU + pool) + 64 + 10
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "engine/model.h"

namespace dltune::engine {

// The spec of a built-in model; not_found naming the built-in names otherwise.
Result<ModelSpec> builtin_model(const std::string& name);
std::vector<std::string> builtin_model_names();

}  // namespace dltune::engine
