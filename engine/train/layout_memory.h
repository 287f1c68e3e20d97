// The memory one rank needs to train under a layout (replicas x stages, micro-batches, schedule,
// recomputation), stage by stage: the memory model (engine/graph/memory_model.h) applied to what
// Trainer::create() and the pipeline executor allocate for each stage's rank. The tuner, the
// recipe check and the dry run refuse layouts whose worst stage does not fit; the worker reports
// its own stage's estimate beside its measured peak.
//
// Beyond the memory model's terms, a pipeline's rank 0 (which streams checkpoints to the file)
// keeps a receive buffer as large as the largest other stage's parameters (PipelineStage);
// every other rank writes or sends from its live buffers (no term).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "engine/graph/memory_model.h"
#include "engine/train/train_config.h"
#include "recipes/model/graph.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::engine {

struct Layout {
  int64_t replica_batch = 1;  // samples per step of one replica (at most: the largest shard)
  int stages = 1;
  std::vector<std::string> partition;  // first node of each stage (empty for one stage)
  int microbatches = 1;
  recipes::PipelineSchedule schedule = recipes::PipelineSchedule::kOneFOneB;
  bool recompute = false;
  std::string optimizer = "sgd";
  bool offload_optimizer = false;  // GPU: the optimizer state in host memory
  bool gpu = false;                // the GPU engine (device memory)
  // The CPU engine's compute settings (MemoryQuery's): threads, precision, kernel choices.
  int threads = 1;
  std::string precision = "fp32";
  std::map<std::string, std::string> kernels;
};

struct StageMemory {
  std::string first_node;  // the stage's first node
  MemoryTerms terms;
};

// Each stage's terms under `layout` (one entry for data parallelism). Errors (invalid_input): a
// partition that does not cut `graph` into `stages` stages at its cut points, batch < 1,
// micro-batches < 1, the graph's own problems.
Result<std::vector<StageMemory>> layout_memory(const recipes::Graph& graph, const Layout& layout);

// The largest stage's total, and its index.
int64_t worst_total(const std::vector<StageMemory>& stages, int* index = nullptr);

// The layout a TrainConfig runs on `ranks` ranks (its replica batch: the sampler's largest
// shard of the global batch).
Layout layout_of(const TrainConfig& config, int ranks);

// One rank's terms: its stage's (rank r runs stage r % stages), without the checkpoint receive
// buffer on every rank but 0 (layout_memory() counts it on stage 0: its worst rank).
Result<MemoryTerms> rank_memory(const TrainConfig& config, int ranks, int rank);

// The memory one rank of `recipe` may use: launch.memory_per_rank when it sets one, else
// (auto) on the GPU engine (comm.backend nccl) the memory of GPU 0 as this process sees it (the
// launcher makes one GPU visible per rank), else what this process may use
// (rss::memory_limit_bytes(): the cgroup's limit or the machine's memory) over the
// `ranks_per_node` ranks sharing it. `source` says which, for messages ("launch.memory_per_rank",
// "auto: 2 ranks' share of the memory this process may use"). bytes is 0 when none is known
// (a GPU recipe where no GPU is visible: source says why).
struct RankMemoryLimit {
  int64_t bytes = 0;
  std::string source;
};
RankMemoryLimit rank_memory_limit(const recipes::Recipe& recipe, int ranks_per_node);

// {"parameters": bytes, ..., "total": bytes}.
nlohmann::json memory_json(const MemoryTerms& t);

// "parameters 1.2 MiB, gradients ..., total 9.8 MiB" for people.
std::string terms_text(const MemoryTerms& t);

}  // namespace dltune::engine
