// The memory one rank needs to train under a layout (replicas x stages, micro-batches, schedule,
// recomputation), stage by stage: the memory model (planning/memory_model.h) applied to what
// the trainer and the pipeline executor allocate for each stage's rank. The tuner, the recipe
// check and the dry run refuse layouts whose worst stage does not fit; the worker reports its
// own stage's estimate beside its measured peak (engine/train/rank_memory.h).
//
// Beyond the memory model's terms, a pipeline's rank 0 (which streams checkpoints to the file)
// keeps a receive buffer as large as the largest other stage's parameters (PipelineStage);
// every other rank writes or sends from its live buffers (no term). A data-parallel CPU run
// that checkpoints keeps a snapshot on rank 0 for the background write
// (engine/io/checkpoint_writer.h): its parameters, optimizer state and model state, once more.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "planning/memory_model.h"
#include "recipes/model/graph.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::planning {

struct Layout {
  int64_t replica_batch = 1;  // samples per step of one replica (at most: the largest shard)
  int stages = 1;
  std::vector<std::string> partition;  // first node of each stage (empty for one stage)
  int microbatches = 1;
  recipes::PipelineSchedule schedule = recipes::PipelineSchedule::kOneFOneB;
  bool recompute = false;
  std::string optimizer = "sgd";
  bool offload_optimizer = false;    // GPU: the optimizer state in host memory
  bool gpu = false;                  // the GPU engine (device memory)
  bool checkpoint_snapshot = false;  // the run checkpoints (the snapshot term: see above)
  ComputeSettings compute;           // the CPU engine's threads, precision and kernels
};

struct StageMemory {
  std::string first_node;  // the stage's first node
  MemoryTerms terms;
};

// Each stage's terms under `layout` (one entry for data parallelism), its executor's buffers
// from `buffers`. Errors (invalid_input): a partition that does not cut `graph` into `stages`
// stages at its cut points, batch < 1, micro-batches < 1, the graph's own problems.
Result<std::vector<StageMemory>> layout_memory(const recipes::Graph& graph, const Layout& layout,
                                               const BatchBuffersFn& buffers);

// The largest stage's total, and its index.
int64_t worst_total(const std::vector<StageMemory>& stages, int* index = nullptr);

// The memory one rank of `recipe` may use: launch.memory_per_rank when it sets one, else
// (auto) on the GPU engine (comm.backend nccl) the memory of the rank's GPU, `gpu_memory()`
// (the engine asks CUDA for GPU 0 as its process sees it: the launcher makes one GPU visible per
// rank), else what this process may use (rss::memory_limit_bytes(): the cgroup's limit or the
// machine's memory) over the `ranks_per_node` ranks sharing it. `source` says which, for
// messages ("launch.memory_per_rank", "auto: 2 ranks' share of the memory this process may
// use"). bytes is 0 when none is known (a GPU recipe where no GPU answers: source says why).
struct RankMemoryLimit {
  int64_t bytes = 0;
  std::string source;
};
using GpuMemoryFn = std::function<Result<uint64_t>()>;
RankMemoryLimit rank_memory_limit(const recipes::Recipe& recipe, int ranks_per_node,
                                  const GpuMemoryFn& gpu_memory);

}  // namespace dltune::planning
