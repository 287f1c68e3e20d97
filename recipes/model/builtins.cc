#include "recipes/model/builtins.h"

#include <map>

#include "recipes/model/builtins_internal.h"

namespace dltune::recipes {
namespace {

Node layer(OpKind op, OpAttrs a = {}) { return Node{"", op, std::move(a), {}}; }
Node linear(int64_t out) {
  OpAttrs a;
  a.out = out;
  return layer(OpKind::kLinear, a);
}
Node conv(int64_t out, int64_t kernel, int64_t stride = 1, int64_t pad = 0, int64_t groups = 1) {
  OpAttrs a;
  a.out = out;
  a.kernel = kernel;
  a.stride = stride;
  a.pad = pad;
  a.groups = groups;
  return layer(OpKind::kConv2d, a);
}
Node pool(OpKind op, int64_t kernel, int64_t stride, int64_t pad = 0) {
  OpAttrs a;
  a.kernel = kernel;
  a.stride = stride;
  a.pad = pad;
  return layer(op, a);
}

std::vector<Node> alexnet(int64_t classes) {
  const Node relu = layer(OpKind::kRelu);
  const Node lrn = layer(OpKind::kLrn);  // size 5, alpha 1e-4, beta 0.75, k 1
  const Node maxpool = pool(OpKind::kMaxPool, 3, 2);
  const Node dropout = layer(OpKind::kDropout);
  return {conv(96, 11, 4),
          relu,
          lrn,
          maxpool,
          conv(256, 5, 1, 2, 2),
          relu,
          lrn,
          maxpool,
          conv(384, 3, 1, 1),
          relu,
          conv(384, 3, 1, 1, 2),
          relu,
          conv(256, 3, 1, 1, 2),
          relu,
          maxpool,
          linear(4096),
          relu,
          dropout,
          linear(4096),
          relu,
          dropout,
          linear(classes)};
}

std::optional<std::vector<Node>> chain_layers(std::string_view name, int64_t classes) {
  const Node relu = layer(OpKind::kRelu);
  if (name == "mlp")
    return std::vector<Node>{layer(OpKind::kFlatten), linear(512), relu, linear(256), relu,
                             linear(classes)};
  if (name == "lenet")
    return std::vector<Node>{conv(20, 5),    pool(OpKind::kMaxPool, 2, 2),
                             conv(50, 5),    pool(OpKind::kMaxPool, 2, 2),
                             linear(500),    relu,
                             linear(classes)};
  if (name == "lenet5")
    return std::vector<Node>{conv(6, 5, 1, 2),
                             relu,
                             pool(OpKind::kAvgPool, 2, 2),
                             conv(16, 5),
                             relu,
                             pool(OpKind::kAvgPool, 2, 2),
                             linear(120),
                             relu,
                             linear(84),
                             relu,
                             linear(classes)};
  if (name == "alexnet") return alexnet(classes);
  if (name == "cifar-cnn")
    return std::vector<Node>{conv(32, 5, 1, 2),
                             pool(OpKind::kMaxPool, 3, 2, 1),
                             relu,
                             conv(32, 5, 1, 2),
                             relu,
                             pool(OpKind::kAvgPool, 3, 2, 1),
                             conv(64, 5, 1, 2),
                             relu,
                             pool(OpKind::kAvgPool, 3, 2, 1),
                             linear(64),
                             linear(classes)};
  return std::nullopt;
}

}  // namespace

const std::vector<BuiltinInfo>& builtin_models() {
  static const std::vector<BuiltinInfo> models = {
      {"mlp", "chain", {1, 28, 28}, 10, "784-512-256-classes perceptron"},
      {"lenet", "chain", {1, 28, 28}, 10, "Caffe's MNIST LeNet"},
      {"lenet5", "chain", {1, 28, 28}, 10, "LeNet-5 with ReLU"},
      {"alexnet", "chain", {3, 227, 227}, 1000, "Caffe's bvlc_alexnet (grouped, LRN)"},
      {"cifar-cnn", "chain", {3, 32, 32}, 10, "Caffe's cifar10_quick"},
      {"resnet18", "cnn", {3, 224, 224}, 1000, "torchvision ResNet-18"},
      {"resnet50", "cnn", {3, 224, 224}, 1000, "torchvision ResNet-50"},
      {"resnet101", "cnn", {3, 224, 224}, 1000, "torchvision ResNet-101"},
      {"vgg16", "cnn", {3, 224, 224}, 1000, "torchvision VGG-16"},
      {"googlenet", "cnn", {3, 224, 224}, 1000, "torchvision GoogLeNet (no auxiliary heads)"},
      {"resnet20", "cifar-resnet", {3, 32, 32}, 10, "He et al. CIFAR ResNet-20 (option A)"},
      {"resnet32", "cifar-resnet", {3, 32, 32}, 10, "He et al. CIFAR ResNet-32 (option A)"},
      {"resnet56", "cifar-resnet", {3, 32, 32}, 10, "He et al. CIFAR ResNet-56 (option A)"},
      {"resnet110", "cifar-resnet", {3, 32, 32}, 10, "He et al. CIFAR ResNet-110 (option A)"},
      {"gpt2-small", "gpt", {1024}, 50257, "GPT-2 small: 12 x 768, 12 heads, tied embeddings"},
      {"gpt-tiny", "gpt", {128}, 256, "GPT-2 block structure, 4 x 128, 4 heads, bytes"},
  };
  return models;
}

std::vector<std::string> builtin_model_names() {
  std::vector<std::string> out;
  for (const auto& m : builtin_models()) out.push_back(m.name);
  return out;
}

std::optional<BuiltinInfo> builtin_info(std::string_view name) {
  for (const auto& m : builtin_models())
    if (m.name == name) return m;
  return std::nullopt;
}

bool is_gpt(std::string_view name) {
  auto info = builtin_info(name);
  return info && info->family == "gpt";
}

Graph chain_graph(const Shape& input, std::vector<Node> nodes) {
  Graph g;
  g.input = input;
  std::map<OpKind, int> counts;
  for (Node& n : nodes) {
    const int k = ++counts[n.op];
    if (n.name.empty()) n.name = std::string(op_name(n.op)) + std::to_string(k);
    if (n.op == OpKind::kLinear) n.attrs.flatten = true;
    n.from.clear();
    g.nodes.push_back(std::move(n));
  }
  return g;
}

std::optional<Graph> builtin_graph(std::string_view name, const BuiltinOptions& options) {
  auto info = builtin_info(name);
  if (!info) return std::nullopt;
  BuiltinOptions o = options;
  if (o.classes <= 0) o.classes = info->default_classes;
  if (info->family == "gpt") {
    const bool small = name == "gpt2-small";
    if (o.blocks <= 0) o.blocks = small ? 12 : 4;
    if (o.width <= 0) o.width = small ? 768 : 128;
    if (o.heads <= 0) o.heads = small ? 12 : 4;
    if (o.vocab <= 0) o.vocab = small ? 50257 : 256;
    if (o.input.empty()) o.input = {o.context > 0 ? o.context : info->default_input[0]};
    if (o.context <= 0) o.context = std::max(info->default_input[0], o.input[0]);
    return internal::gpt_graph(o);
  }
  if (o.input.empty()) o.input = info->default_input;
  if (info->family == "chain") return chain_graph(o.input, *chain_layers(name, o.classes));
  return internal::cnn_graph(name, o);
}

}  // namespace dltune::recipes
