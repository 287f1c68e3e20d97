// The built-in architectures, as graphs (recipes/model/graph.h). They live here, beside the
// op table, rather than in the engine because the recipe checker, `dltune model show`, the
// tuner (memory model, predictions) and the engine all need them, and recipes/ is the lowest
// module those share; the engine adds only kernels.
//
// - mlp, lenet, lenet5, alexnet, cifar-cnn: the 2012-era chains (Caffe's definitions).
// - resnet18, resnet50, resnet101, vgg16, googlenet: torchvision 0.14's architectures with its
//   parameter names (googlenet without auxiliary heads, transform_input=False), so torchvision
//   weights load unchanged (resnet50: 25,557,032 parameters for 1000 classes).
// - resnet20, resnet32, resnet56, resnet110: He et al. 2016's CIFAR ResNets, option A shortcuts
//   (parameter-free: stride-2 subsampling and zero-padded channels).
// - gpt2-small (12 blocks, width 768, 12 heads, context 1024, vocabulary 50257, tied
//   embeddings: 124,439,808 parameters) and gpt-tiny (4 blocks, width 128, 4 heads, context
//   128, vocabulary 256 by default), GPT-2's pre-norm blocks with GELU (tanh).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recipes/model/graph.h"

namespace dltune::recipes {

struct BuiltinOptions {
  int64_t classes = 0;  // 0 = the model's default (10 or 1000)
  Shape input;          // per-sample input; empty = the model's default
  // GPT models (0 = the model's default): transformer blocks, width, heads, context, vocabulary.
  int64_t blocks = 0, width = 0, heads = 0, context = 0, vocab = 0;
};

struct BuiltinInfo {
  std::string name;
  std::string family;  // "chain", "cnn", "cifar-resnet", "gpt"
  Shape default_input;
  int64_t default_classes = 0;  // GPT: the vocabulary
  std::string description;
};

std::vector<std::string> builtin_model_names();
const std::vector<BuiltinInfo>& builtin_models();
std::optional<BuiltinInfo> builtin_info(std::string_view name);
// The graph of built-in `name` with `options`; nullopt when `name` is not a built-in. The graph
// is not checked here (analyze_graph does: an input too small for the network is a problem
// there, not a crash).
std::optional<Graph> builtin_graph(std::string_view name, const BuiltinOptions& options);
bool is_gpt(std::string_view name);

// A chain: every node reads the one before it. Unnamed nodes are named "<op><k>" with k
// counting that op from 1 ("conv2d1", "relu2"); linear layers flatten their input, as a
// `layers:` list has always meant.
Graph chain_graph(const Shape& input, std::vector<Node> nodes);

}  // namespace dltune::recipes
