#include "engine/train/rank_memory.h"

#include <algorithm>

#include "engine/gpu/gpu_context.h"
#include "engine/graph/batch_buffers.h"

namespace dltune::engine {

planning::Layout layout_of(const TrainConfig& c, int ranks) {
  planning::Layout l;
  const int replicas = std::max(1, ranks / std::max(1, c.stages));
  const int global = c.global_batch_for(ranks);
  l.replica_batch = (global + replicas - 1) / replicas;
  l.stages = c.stages;
  l.partition = c.partition;
  l.microbatches = c.microbatches;
  l.schedule = c.pipeline_schedule;
  l.recompute = c.recompute;
  l.optimizer = c.optimizer;
  l.offload_optimizer = c.offload_optimizer;
  l.gpu = c.device == "gpu";
  l.checkpoint_snapshot = !c.checkpoint_path.empty();
  l.compute = {c.threads, c.precision, c.kernels};
  return l;
}

Result<planning::MemoryTerms> rank_memory(const TrainConfig& config, int ranks, int rank) {
  auto graph = model_graph(config);
  if (!graph) return graph.error();
  auto stages = planning::layout_memory(*graph, layout_of(config, ranks), batch_buffers);
  if (!stages) return stages.error();
  planning::MemoryTerms t =
      (*stages)[static_cast<size_t>(rank % static_cast<int>(stages->size()))].terms;
  if (rank != 0) t.checkpoint = 0;  // only rank 0 stages checkpoints (layout_memory.h)
  return t;
}

planning::RankMemoryLimit rank_memory_limit(const recipes::Recipe& recipe, int ranks_per_node) {
  return planning::rank_memory_limit(recipe, ranks_per_node,
                                     [] { return gpu::device_memory_bytes(0); });
}

}  // namespace dltune::engine
