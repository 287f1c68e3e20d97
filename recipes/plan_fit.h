// Fitting a stored plan to the recipe it is used for. A plan in a database was tuned for a
// recipe whose signature is in its key (recipe_signature), but a launch never lets a plan
// override what the recipe fixes: the recipe's fixed settings are written over the plan's
// before the ranks see it (a near hit only narrows the tuner's search; it is never run).
#pragma once

#include <string>
#include <vector>

#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::recipes {

// Writes every setting `recipe` fixes over `plan` (for `ranks` ranks) and returns one note per
// field that changed ("training.per_rank_batch: the recipe fixes 32, the plan had 64"); a plan
// laid out as a pipeline counts its replicas (parallel.replicas) instead of `ranks`:
//   batch.per_rank         per_rank_batch (global = per_rank x ranks, weak scaling)
//   batch.global           global_batch (per_rank = global / ranks, strong scaling)
//   scaling weak|strong    scaling
//   schedule.warmup_steps  warmup_steps is never below the recipe's
//   comm.bucket            bucket_bytes
//   comm.overlap on|off    overlap
//   comm.allreduce         the allreduce rules: that algorithm for every size
// `auto` settings are left to the plan.
std::vector<std::string> apply_fixed_settings(const Recipe& recipe, int64_t ranks, Plan* plan);

}  // namespace dltune::recipes
