// The static plan of a graph's backward pass, worked out once per model from its structure:
// which gradient writes add rather than overwrite, which buffers hold the activation gradients,
// and when each parameter's gradient is final.
//
// Backward runs the nodes in reverse list order. A tensor read by several nodes (a residual
// block's input, a tied weight) gets one contribution per reader: the first reader in backward
// order writes it, the later ones add (GradOut::accumulate, Op::accumulate_grad). The gradient of
// node i's output lives from its first reader's backward until node i's own backward, so
// buffers ("slots") are reused by a greedy interval allocation in backward order; a CNN needs a
// handful however deep it is. A parameter tensor's gradient is final after the backward of the
// earliest node (in list order) that reads it: the trainer starts reducing a gradient bucket as
// soon as all its tensors are final.
//
// A ReLU right after a batch norm or a residual add that only it reads is fused into it
// (fused_relus()): that node writes max(0, y) where the ReLU's output would be, and its backward
// takes the ReLU's output gradient, masked by that output, where its own would be. The ReLU node
// runs nothing and owns no activation buffer; its slot is the fused node's. On resnet20 (b64,
// one thread) the passes over the activations it saves were 6 % of a step for the batch norms'
// ReLUs and 3 % for the blocks' (after the add).
#pragma once

#include <cstdint>
#include <vector>

#include "recipes/model/graph.h"

namespace dltune::engine {

struct BackwardPlan {
  // Per node, per input: whether its gradient is added to the source's buffer.
  std::vector<std::vector<bool>> din_accumulate;
  // Per node, per tensor of GraphInfo::node_params: whether its gradient is added.
  std::vector<std::vector<bool>> param_accumulate;
  // Per node: the slot holding the gradient of its output; -1 for the last node (the caller's
  // loss gradient).
  std::vector<int> slot;
  // Per slot: its size in floats per sample.
  std::vector<int64_t> slot_floats;
  // Per node: whether no node reads its output (its gradient is zero: the slot is cleared).
  std::vector<bool> unread;
  // Per node: the parameter tensors (indices into GraphInfo::params) whose gradient is final
  // after its backward.
  std::vector<std::vector<int>> final_after;
  // Tensors in the order their gradient becomes final.
  std::vector<int> final_order;
  // Per node: the node (batch norm or add) a ReLU is fused into (its output is that node's),
  // else -1.
  std::vector<int> fused_into;
};

// The ReLUs fusable into the node before them (fused_into per node, -1 where not): a ReLU
// whose one input is the batch norm or add just before it in list order, read by nothing else
// (the ops whose Op::fuse_relu() accepts). None
// when the environment has DLTUNE_FUSE=0 (to compare). Precondition: info is graph's valid
// analysis.
std::vector<int> fused_relus(const recipes::Graph& graph, const recipes::GraphInfo& info);

// Precondition: `info` is the analysis of a valid graph (info.ok()); `fused` is empty (no
// fusion) or fused_relus() of it.
BackwardPlan plan_backward(const recipes::GraphInfo& info, const std::vector<int>& fused = {});

}  // namespace dltune::engine
