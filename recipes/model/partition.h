// Cutting a model graph into pipeline stages (HyPar-Flow's partitions, GPipe's stages).
//
// A stage is a contiguous run of the graph's node list. The list may be cut before node k only
// where exactly one tensor crosses: every node from k on reads, from the nodes before k, the
// output of one and the same node (a chain between layers; a ResNet between blocks; a GPT on its
// residual stream between blocks), and none reads the model's input. That tensor is what stage
// s sends to stage s + 1 each micro-batch, and its gradient what comes back.
//
// A stage's graph is the sub-graph with that tensor as its input (named "input"); node names,
// and so parameter names, are kept. A tied weight whose owner is in an earlier stage (GPT's head
// reading the token embedding) becomes an own weight of the later stage, listed in `shared`: the
// executor keeps the copies equal (both start from the owner's values and sum their gradients).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "recipes/model/graph.h"

namespace dltune::recipes {

// The positions k in 1..n-1 before which the graph may be cut, increasing.
std::vector<int> cut_points(const GraphInfo& info);

struct Stage {
  int begin = 0, end = 0;  // nodes [begin, end) of the full graph
  int input_node = -1;     // the node whose output is the stage's input; -1: the model's input
  Graph graph;             // the sub-graph
  // Tied weights split from their owner: {this stage's tensor name, the owner's tensor name}.
  std::vector<std::pair<std::string, std::string>> shared;
};

// The stage of nodes [begin, end). Preconditions: info analyses `graph` and is ok; begin is 0
// or a cut point, end is n or a cut point, begin < end. Errors (invalid_input) otherwise, naming
// the node.
Result<Stage> make_stage(const Graph& graph, const GraphInfo& info, int begin, int end);

// The first node of each of S stages, by name (a Plan's parallel.partition), from the stages'
// boundaries; and back. Errors: a name that is not a node, or not a cut point.
std::vector<std::string> partition_names(const Graph& graph, const std::vector<int>& firsts);
Result<std::vector<int>> partition_nodes(const Graph& graph, const GraphInfo& info,
                                         const std::vector<std::string>& names);

// Micro-batches when a recipe leaves them open: min(4 S, the replica's batch), so the 1F1B
// bubble (S-1)/(M+S-1) stays below 20 % while a micro-batch keeps a sample; 1 for one stage.
inline int default_microbatches(int stages, int64_t replica_batch) {
  if (stages <= 1) return 1;
  return static_cast<int>(std::clamp<int64_t>(replica_batch, 1, int64_t{4} * stages));
}

// Balanced cuts: S stages over the cut points minimising the largest stage's cost (the sum of
// `cost` over its nodes: measured forward + backward seconds, or FLOPs), by dynamic
// programming over the cut points (O(S x C^2)). `fits(begin, end)` may veto a stage (memory).
// Returns the first node of each stage; errors (invalid_input) when the graph has fewer than
// S - 1 cut points or no cut fits, saying which.
Result<std::vector<int>> balanced_partition(const GraphInfo& info, const std::vector<double>& cost,
                                            int stages,
                                            const std::function<bool(int, int)>& fits = {});

}  // namespace dltune::recipes
