#include "engine/graph/backward_plan.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace dltune::engine {

std::vector<int> fused_relus(const recipes::Graph& graph, const recipes::GraphInfo& info) {
  const int n = static_cast<int>(graph.nodes.size());
  std::vector<int> readers(static_cast<size_t>(n), 0);
  for (const auto& srcs : info.inputs)
    for (int src : srcs)
      if (src >= 0) ++readers[static_cast<size_t>(src)];
  std::vector<int> fused(static_cast<size_t>(n), -1);
  const char* fuse = std::getenv("DLTUNE_FUSE");  // NOLINT: DLTUNE_FUSE=0 compares without
  if (fuse != nullptr && std::string(fuse) == "0") return fused;
  for (int j = 1; j < n; ++j) {
    const auto uj = static_cast<size_t>(j);
    const int i = j - 1;
    const recipes::OpKind before = graph.nodes[static_cast<size_t>(i)].op;
    if (graph.nodes[uj].op == recipes::OpKind::kRelu && info.inputs[uj] == std::vector<int>{i} &&
        (before == recipes::OpKind::kBatchNorm || before == recipes::OpKind::kAdd) &&
        readers[static_cast<size_t>(i)] == 1) {
      fused[uj] = i;
    }
  }
  return fused;
}

BackwardPlan plan_backward(const recipes::GraphInfo& info, const std::vector<int>& fused) {
  const int n = static_cast<int>(info.outputs.size());
  BackwardPlan p;
  p.fused_into = fused.empty() ? std::vector<int>(static_cast<size_t>(n), -1) : fused;
  p.din_accumulate.resize(static_cast<size_t>(n));
  p.param_accumulate.resize(static_cast<size_t>(n));
  p.slot.assign(static_cast<size_t>(n), -2);  // -2: not allocated yet
  p.unread.assign(static_cast<size_t>(n), true);
  p.final_after.resize(static_cast<size_t>(n));
  std::vector<bool> written(static_cast<size_t>(n), false);
  std::vector<bool> param_written(info.params.size(), false);
  std::vector<int> free_slots;
  auto allocate = [&](int node) {
    const int64_t size = recipes::numel(info.outputs[static_cast<size_t>(node)]);
    // The smallest free slot that holds it, else the largest free one (grown), else a new one.
    int best = -1;
    for (int s : free_slots) {
      const int64_t cap = p.slot_floats[static_cast<size_t>(s)];
      if (best < 0) {
        best = s;
        continue;
      }
      const int64_t bcap = p.slot_floats[static_cast<size_t>(best)];
      const bool fits = cap >= size, bfits = bcap >= size;
      if ((fits && (!bfits || cap < bcap)) || (!fits && !bfits && cap > bcap)) best = s;
    }
    if (best < 0) {
      best = static_cast<int>(p.slot_floats.size());
      p.slot_floats.push_back(size);
    } else {
      free_slots.erase(std::find(free_slots.begin(), free_slots.end(), best));
      p.slot_floats[static_cast<size_t>(best)] =
          std::max(p.slot_floats[static_cast<size_t>(best)], size);
    }
    p.slot[static_cast<size_t>(node)] = best;
  };
  for (int i = 0; i < n; ++i)
    for (int src : info.inputs[static_cast<size_t>(i)])
      if (src >= 0) p.unread[static_cast<size_t>(src)] = false;
  p.unread[static_cast<size_t>(n - 1)] = false;
  p.slot[static_cast<size_t>(n - 1)] = -1;
  for (int i = n - 1; i >= 0; --i) {
    const auto ui = static_cast<size_t>(i);
    if (p.slot[ui] == -2) allocate(i);  // unread: a zero gradient of its own
    if (const int into = p.fused_into[ui]; into >= 0) {
      // The batch norm's output gradient is this ReLU's: one slot, freed after the batch norm.
      p.din_accumulate[ui].push_back(false);
      p.slot[static_cast<size_t>(into)] = p.slot[ui];
      written[static_cast<size_t>(into)] = true;
      continue;
    }
    for (int src : info.inputs[ui]) {
      if (src < 0) {
        p.din_accumulate[ui].push_back(false);
        continue;
      }
      const auto us = static_cast<size_t>(src);
      p.din_accumulate[ui].push_back(written[us]);
      if (!written[us]) allocate(src);
      written[us] = true;
    }
    for (int t : info.node_params[ui]) {
      const auto ut = static_cast<size_t>(t);
      p.param_accumulate[ui].push_back(param_written[ut]);
      param_written[ut] = true;
    }
    if (p.slot[ui] >= 0) free_slots.push_back(p.slot[ui]);
  }
  // A tensor is final after its earliest reader in list order (the last in backward order).
  std::vector<int> earliest(info.params.size(), n);
  for (int i = 0; i < n; ++i)
    for (int t : info.node_params[static_cast<size_t>(i)])
      earliest[static_cast<size_t>(t)] = std::min(earliest[static_cast<size_t>(t)], i);
  for (size_t t = 0; t < info.params.size(); ++t)
    if (earliest[t] < n)
      p.final_after[static_cast<size_t>(earliest[t])].push_back(static_cast<int>(t));
  for (int i = n - 1; i >= 0; --i)
    for (int t : p.final_after[static_cast<size_t>(i)]) p.final_order.push_back(t);
  return p;
}

}  // namespace dltune::engine
