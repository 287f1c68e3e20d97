// A model is a graph of named nodes: each applies one op (recipes/model/ops.h) to the outputs of
// the nodes it reads `from` (or to the model's input, named "input"). Nodes are listed so that
// every node comes after the nodes it reads (a topological order): the engine runs forward in
// that order and backward in the reverse one. The last node's output is the model's output (the
// logits). A chain of layers (a recipe's `layers:` list) is the special case where every node
// reads the one before it.
//
// Parameter tensors are named "<node>.<param>" ("layer1.0.conv1.weight"), as in PyTorch's
// state_dict, so weights move between dltune and PyTorch by name (safetensors).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "recipes/model/ops.h"

namespace dltune::recipes {

// The name a node uses to read the model's input.
inline constexpr const char* kGraphInput = "input";

struct Node {
  std::string name;  // unique; letters, digits, '.', '_', '-'
  OpKind op = OpKind::kRelu;
  OpAttrs attrs;
  std::vector<std::string> from;  // input node names; empty = the node listed before it
};

// What the model's input holds: image-like floats, or token ids (text) that only an embedding
// may read. Token ids travel as floats (exact below 2^24) so that every tensor is f32.
enum class InputKind { kFloat, kTokens };

struct Graph {
  Shape input;  // per-sample input shape
  InputKind input_kind = InputKind::kFloat;
  std::vector<Node> nodes;
};

// A parameter or state tensor of the analysed graph, in flat-buffer order.
struct TensorInfo {
  std::string name;  // "<node>.<param>"
  Shape shape;
  int node = 0;  // the node that owns it
  ParamDef def;
  int64_t offset = 0;  // in the flat parameter buffer (trainable) or state buffer (state)
};

// The result of analysing a graph against its input shape. Never fails as a call: problems are
// listed, and analysis stops at the first node that cannot be resolved.
struct GraphInfo {
  std::vector<Shape> outputs;            // per node
  std::vector<std::vector<int>> inputs;  // per node: indices of the nodes read; -1 = the input
  std::vector<TensorInfo> params;        // trainable, in layout order
  std::vector<TensorInfo> state;         // non-trainable (batch-norm statistics)
  // Per node: the indices into `params` of the tensors the node uses (a tied linear uses the
  // tensor of another node).
  std::vector<std::vector<int>> node_params;
  std::vector<std::vector<int>> node_state;
  int64_t parameters = 0;  // trainable floats, a tied tensor counted once
  int64_t state_floats = 0;
  double flops_per_sample = 0;  // forward
  // {node index, message}; the message says what is wrong and what would work.
  std::vector<std::pair<size_t, std::string>> problems;
  bool ok() const { return problems.empty(); }
  const Shape& output() const { return outputs.back(); }
};

GraphInfo analyze_graph(const Graph& graph);

// A node named `name`, or -1.
int find_node(const Graph& graph, const std::string& name);

// Graph <-> JSON: {"input": [..], "input_kind": "float"|"tokens", "nodes": [{"name", "op",
// "from": [..], <every attribute of the op>}]}. Parsing checks op names, attribute names and
// types (not shapes: analyze_graph does); errors (invalid_input) name the node and key.
nlohmann::json graph_to_json(const Graph& graph);
Result<Graph> graph_from_json(const nlohmann::json& j);

// One line per node: "name op(attrs) <- from": what the recipe signature hashes.
std::string describe_graph(const Graph& graph);

}  // namespace dltune::recipes
