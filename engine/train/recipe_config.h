// From a recipe and its Plan to the TrainConfig a rank runs (DESIGN.md: ranks execute the Plan
// they are given and never re-decide). The one mapping: every rank of a launch runs it on the
// recipe as run and the Plan its job was given (engine/worker/rank_job.h), and the tuner's
// trial trainings on theirs, so a trial measures exactly what the launch will run.
#pragma once

#include "common/result.h"
#include "engine/train/train_config.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::engine {

// The TrainConfig for `recipe` run as `ranks` ranks under `plan`, after
// recipes::check_plan_for_recipe() (whose errors it returns):
// - model: the recipe's graph (TrainConfig::graph; a built-in expanded for the data's input and
//   classes), named after the built-in or, for layers / nodes, the recipe;
// - data: synthetic-digits -> "synthetic" with train/held-out sizes from `samples` and the
//   held-out fraction; synthetic-imagenet -> "synthetic-imagenet" likewise, with input and
//   classes set; mnist / cifar10 -> "mnist:DIR" / "cifar10:DIR", held out on their test files
//   (`heldout: test`) or as heldout_split, the recipe's share of the training files;
//   synthetic-cifar -> "synthetic-cifar" like synthetic-digits; text -> "text:FILE" with the
//   held-out share as heldout_split (the file's last part);
// - the layout (stages, cuts, micro-batches, schedule, recomputation, offload) from
//   plan.parallel; batch and scaling from plan.training (per replica); lr = recipe lr x
//   plan.training.lr_scale; warm-up = max(recipe, plan) steps, ramping from 0; schedule
//   (step_size, gamma; cosine's min_lr), momentum, weight decay, seed from the recipe;
// - steps: recipes::training_steps(); checkpoint_every: recipes::checkpoint_interval();
// - device "gpu" when the recipe's comm.backend is nccl (recipes have no device key), else
//   "cpu";
// - bucket_bytes, overlap from plan.training; algorithms from plan.collectives' allreduce
//   rules, [min, max) ranges becoming "at most max - 1" ranges, a ring's segment_bytes carried
//   (0: comm's default), neighbours with the same algorithm and segment merged; a plan without
//   allreduce rules: ring everywhere;
// - paths (metrics, checkpoint, trace) are left empty for the caller to set.
// Errors (invalid_input, naming the recipe key or plan field): those of check_plan_for_recipe;
// io_error when an epochs-based recipe's data files cannot be read.
Result<TrainConfig> train_config_from(const recipes::Recipe& recipe, const recipes::Plan& plan,
                                      int ranks);

}  // namespace dltune::engine
