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

// The recipe's own choices as a plan for `job` ("default" provenance): its batch (per-rank, or
// global / ranks; 32 per rank when `auto`), scaling (weak unless strong is asked for), lr
// scaled from lr_reference_batch by optimizer.lr_scaling's rule (auto: linear), its bucket
// (4 MiB when auto), overlap (on when auto) and allreduce algorithm (ring when auto); data
// parallel over every rank, in training.parallel.microbatches micro-batches when it fixes them.
// What `dltune launch` runs untuned, and what a rank started without a plan trains.
Plan recipe_default_plan(const Recipe& recipe, const JobShape& job);

// Whether `plan` can train `recipe` as a job of `ranks` ranks: the plan validates
// (validate_plan); its layout covers the ranks (replicas x stages = ranks); its batch fits the
// replicas (weak: global = per-rank x replicas; strong: at least one sample per replica) and
// the recipe's training.batch.max_global; its lr_scale is positive; the recipe's model is f32
// with layers, its optimizer sgd or adamw, a step schedule has a step_size, synthetic data
// leaves training samples; optimizer offload and the nccl_* allreduce algorithms only with the
// GPU engine (comm.backend nccl). The launcher checks a plan with it before any rank starts,
// and every rank again before it maps the plan to its engine configuration. Errors
// (invalid_input) name the recipe key or the plan field: "recipe 'x': plan.parallel: 2
// replicas x 1 stages is not the job's 4 ranks".
Status check_plan_for_recipe(const Recipe& recipe, const Plan& plan, int64_t ranks);

}  // namespace dltune::recipes
