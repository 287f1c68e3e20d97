// Internal to recipes/model: the families of built-in graphs (builtins.cc dispatches to them).
#pragma once

#include <optional>
#include <string_view>

#include "recipes/model/builder.h"
#include "recipes/model/builtins.h"

namespace dltune::recipes::internal {

// ResNets, VGG-16, GoogLeNet, CIFAR ResNets (builtins_cnn.cc); nullopt for other names.
// `o` has every field filled (input, classes).
std::optional<Graph> cnn_graph(std::string_view name, const BuiltinOptions& o);
// gpt2-small and gpt-tiny (builtins_gpt.cc); `o` has every field filled.
Graph gpt_graph(const BuiltinOptions& o);

}  // namespace dltune::recipes::internal
