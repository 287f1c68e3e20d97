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
//   precision fp32|bf16    precision
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
// The per-rank batch a search of `recipe` on `ranks` ranks centres on: the recipe's per-rank
// batch, else its global batch / ranks, else the model's usual batch (64; cifar-cnn 128;
// alexnet 128).
int64_t reference_per_rank_batch(const Recipe& recipe, int ranks);
// The global batch the recipe's lr is meant for: optimizer.lr_reference_batch, else the
// recipe's own global batch (global_batch, or per_rank_batch x launch.ranks, defaulting to
// `ranks`), else reference_per_rank_batch x ranks.
int64_t lr_reference_batch(const Recipe& recipe, int ranks);

// The warm-up steps of a plan that scales `recipe`'s lr by `lr_scale` for a run of `run_steps`
// steps (training_steps at the plan's global batch; <= 0 where the data cannot say): the
// recipe's schedule.warmup_steps, and where lr_scale > 1 at least 5 % of the run and at least 1
// (Goyal et al.'s gradual warm-up for a linearly scaled lr). The tuner gives its candidates this
// warm-up; a launch serving a cached plan derives it again for its own run's length. (The
// caller counts the steps: for image folders that is a walk of the tree.)
int64_t scaled_lr_warmup(const Recipe& recipe, int64_t run_steps, double lr_scale);

// Whether a plan served from a database (already fitted: apply_fixed_settings) is one a launch
// of `recipe` on `ranks` ranks may run, beyond check_plan_plausible's recipe-free bounds: its
// lr_scale must lie within what the recipe's own lr rule gives at the plan's global batch:
// optimizer.lr_scaling (auto: linear, or the tuner's fallbacks sqrt and none) from
// lr_reference_batch(recipe, ranks) or from optimizer.lr_reference_batch, or 1 (the recipe's lr
// unscaled). A plan from a bundle that scales lr by 1000 where the rule gives 1 is refused here
// before any rank diverges. invalid_input naming the field, the value and the allowed range.
Status check_plan_lr_scale(const Recipe& recipe, int64_t ranks, const Plan& plan);

}  // namespace dltune::recipes
