#include "engine/models.h"

#include "common/strings.h"

namespace dltune::engine {

namespace {

using L = LayerSpec;

ModelSpec mlp() {
  return {"mlp",
          {1, 28, 28},
          10,
          {L::linear(512), L::relu(), L::linear(256), L::relu(), L::linear(10)}};
}

// Caffe LeNet: conv(20,5) pool(2,2) conv(50,5) pool(2,2) ip(500) relu ip(10).
ModelSpec lenet() {
  return {"lenet",
          {1, 28, 28},
          10,
          {L::conv(20, 5), L::maxpool(2, 2), L::conv(50, 5), L::maxpool(2, 2), L::linear(500),
           L::relu(), L::linear(10)}};
}

ModelSpec lenet5() {
  return {"lenet5",
          {1, 28, 28},
          10,
          {L::conv(6, 5, 1, 2), L::relu(), L::maxpool(2, 2), L::conv(16, 5), L::relu(),
           L::maxpool(2, 2), L::linear(120), L::relu(), L::linear(84), L::relu(), L::linear(10)}};
}

// Caffe BVLC AlexNet (deploy prototxt): grouped conv2/4/5, LRN after conv1/conv2.
ModelSpec alexnet() {
  return {"alexnet",
          {3, 227, 227},
          1000,
          {L::conv(96, 11, 4),
           L::relu(),
           L::lrn(5, 1e-4f, 0.75f),
           L::maxpool(3, 2),
           L::conv(256, 5, 1, 2, 2),
           L::relu(),
           L::lrn(5, 1e-4f, 0.75f),
           L::maxpool(3, 2),
           L::conv(384, 3, 1, 1),
           L::relu(),
           L::conv(384, 3, 1, 1, 2),
           L::relu(),
           L::conv(256, 3, 1, 1, 2),
           L::relu(),
           L::maxpool(3, 2),
           L::linear(4096),
           L::relu(),
           L::dropout(0.5f),
           L::linear(4096),
           L::relu(),
           L::dropout(0.5f),
           L::linear(1000)}};
}

ModelSpec cifar() {
  return {"cifar",
          {3, 32, 32},
          10,
          {L::conv(32, 5, 1, 2), L::relu(), L::maxpool(2, 2), L::conv(32, 5, 1, 2), L::relu(),
           L::avgpool(2, 2), L::conv(64, 5, 1, 2), L::relu(), L::avgpool(2, 2), L::linear(64),
           L::relu(), L::linear(10)}};
}

struct Entry {
  const char* name;
  ModelSpec (*make)();
};
constexpr Entry kBuiltins[] = {
    {"mlp", mlp}, {"lenet", lenet}, {"lenet5", lenet5}, {"alexnet", alexnet}, {"cifar", cifar}};

}  // namespace

Result<ModelSpec> builtin_model(const std::string& name) {
  for (const auto& e : kBuiltins)
    if (name == e.name) return e.make();
  return not_found("unknown model '" + name + "'; built-in models are " +
                   strings::join(builtin_model_names(), ", "));
}

std::vector<std::string> builtin_model_names() {
  std::vector<std::string> names;
  for (const auto& e : kBuiltins) names.emplace_back(e.name);
  return names;
}

}  // namespace dltune::engine
