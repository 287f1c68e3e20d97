// The memory model (planning/layout_memory.h) for what this engine runs: a TrainConfig's layout,
// one rank's terms, and a recipe's memory limit with the GPU asked through CUDA. What the worker
// reports beside its measured peak (engine/train/training_memory.h) and the trial search checks
// before it builds a trainer.
#pragma once

#include "common/result.h"
#include "engine/train/train_config.h"
#include "planning/layout_memory.h"
#include "recipes/recipe.h"

namespace dltune::engine {

// The layout a TrainConfig runs on `ranks` ranks (its replica batch: the sampler's largest
// shard of the global batch).
planning::Layout layout_of(const TrainConfig& config, int ranks);

// One rank's terms: its stage's (rank r runs stage r % stages), without the checkpoint receive
// buffer on every rank but 0 (layout_memory() counts it on stage 0: its worst rank). Errors: the
// model's and the layout's.
Result<planning::MemoryTerms> rank_memory(const TrainConfig& config, int ranks, int rank);

// planning::rank_memory_limit() with this process's GPU 0 (gpu::device_memory_bytes).
planning::RankMemoryLimit rank_memory_limit(const recipes::Recipe& recipe, int ranks_per_node);

}  // namespace dltune::engine
