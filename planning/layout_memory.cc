#include "planning/layout_memory.h"

#include <algorithm>

#include "common/rss.h"
#include "planning/schedule.h"
#include "recipes/model/partition.h"

namespace dltune::planning {

RankMemoryLimit rank_memory_limit(const recipes::Recipe& recipe, int ranks_per_node,
                                  const GpuMemoryFn& gpu_memory) {
  if (recipe.launch.memory_per_rank > 0)
    return {static_cast<int64_t>(recipe.launch.memory_per_rank), "launch.memory_per_rank"};
  if (recipe.comm.backend == "nccl") {  // the GPU engine: the rank's memory is its GPU's
    auto gpu = gpu_memory ? gpu_memory() : Result<uint64_t>(unsupported("nothing asked the GPU"));
    if (!gpu)
      return {0, "auto: unknown (the GPU engine trains in its GPU's memory, and " +
                     gpu.error().message() + ")"};
    return {static_cast<int64_t>(*gpu), "auto: the memory of GPU 0 (" +
                                            memory_text(static_cast<int64_t>(*gpu)) +
                                            "; one GPU per rank)"};
  }
  const int per_node = std::max(1, ranks_per_node);
  return {rss::memory_limit_bytes() / per_node,
          "auto: " + std::to_string(per_node) + " ranks' share of the memory this process may use"};
}

Result<std::vector<StageMemory>> layout_memory(const recipes::Graph& graph, const Layout& l,
                                               const BatchBuffersFn& buffers) {
  if (l.replica_batch < 1 || l.microbatches < 1 || l.stages < 1)
    return invalid_input("a layout needs a batch, micro-batches and stages of at least 1");
  const recipes::GraphInfo info = recipes::analyze_graph(graph);
  if (!info.ok()) return invalid_input("the model graph: " + info.problems.front().second);
  // The trainer's micro-batches: min(M, batch) chunks, the first ones one sample larger.
  const int64_t M = std::min<int64_t>(l.microbatches, l.replica_batch);
  const int64_t chunk = (l.replica_batch + M - 1) / M;
  MemoryQuery q;
  q.microbatch = chunk;
  q.local_batch = l.replica_batch;
  q.optimizer = l.optimizer;
  q.offload_optimizer = l.offload_optimizer;
  q.gpu = l.gpu;
  if (!l.gpu) q.compute = l.compute;
  std::vector<StageMemory> out;
  if (l.stages == 1) {
    auto t = estimate_memory(graph, q, buffers);
    if (!t) return t.error();
    // The snapshot is host memory: the GPU engine's device holds none of it.
    if (l.checkpoint_snapshot && !l.gpu) {
      t->checkpoint = (info.parameters + info.state_floats) * int64_t{sizeof(float)} + t->optimizer;
    }
    out.push_back({graph.nodes.empty() ? "" : graph.nodes.front().name, *t});
    return out;
  }
  auto firsts = recipes::partition_nodes(graph, info, l.partition);
  if (!firsts) return firsts.error();
  if (static_cast<int>(firsts->size()) != l.stages)
    return invalid_input("a partition of " + std::to_string(firsts->size()) + " first nodes for " +
                         std::to_string(l.stages) + " stages");
  std::vector<int64_t> packed;  // each stage's largest checkpoint part, floats
  for (int s = 0; s < l.stages; ++s) {
    const int begin = (*firsts)[static_cast<size_t>(s)];
    const int end = s + 1 < l.stages ? (*firsts)[static_cast<size_t>(s) + 1]
                                     : static_cast<int>(graph.nodes.size());
    auto stage = recipes::make_stage(graph, info, begin, end);
    if (!stage) return stage.error();
    MemoryQuery sq = q;
    sq.recompute = l.recompute;
    sq.in_flight = l.recompute ? 1 : in_flight(l.schedule, l.stages, s, static_cast<int>(M));
    sq.boundary_in = s > 0;
    sq.boundary_out = s + 1 < l.stages;
    auto t = estimate_memory(stage->graph, sq, buffers);
    if (!t) return t.error().wrap("stage " + std::to_string(s));
    const recipes::GraphInfo si = recipes::analyze_graph(stage->graph);
    packed.push_back(std::max(si.parameters, si.state_floats));
    out.push_back({graph.nodes[static_cast<size_t>(begin)].name, *t});
  }
  constexpr int64_t F = sizeof(float);
  int64_t largest_other = 0;
  for (int s = 1; s < l.stages; ++s)
    largest_other = std::max(largest_other, packed[static_cast<size_t>(s)]);
  out[0].terms.checkpoint = largest_other * F;
  return out;
}

int64_t worst_total(const std::vector<StageMemory>& stages, int* index) {
  int64_t worst = 0;
  for (size_t s = 0; s < stages.size(); ++s)
    if (stages[s].terms.total() > worst) {
      worst = stages[s].terms.total();
      if (index) *index = static_cast<int>(s);
    }
  return worst;
}

}  // namespace dltune::planning
