// From a recipe and its Plan to the TrainConfig the ranks run (DESIGN.md: ranks execute the Plan
// they are given and never re-decide). One mapping, used by `dltune launch` (which writes the
// result as train_config.json in the run directory) and by the tuner's trial trainings, so a
// trial measures exactly what the launch will run.
#pragma once

#include <cstdint>

#include "common/result.h"
#include "engine/train/train_config.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::engine {

// The TrainConfig for `recipe` run as `ranks` ranks under `plan`:
// - model: the recipe's graph (TrainConfig::graph; a built-in expanded for the data's input and
//   classes), named after the built-in or, for layers / nodes, the recipe;
// - data: synthetic-digits -> "synthetic" with train/held-out sizes from `samples` and the
//   held-out fraction; synthetic-imagenet -> "synthetic-imagenet" likewise, with input and
//   classes set; mnist / cifar10 -> "mnist:DIR" / "cifar10:DIR", held out on their test files
//   (`heldout: test`) or as heldout_split, the recipe's share of the training files;
//   synthetic-cifar -> "synthetic-cifar" like synthetic-digits; text -> "text:FILE" with the
//   held-out share as heldout_split (the file's last part);
// - batch and scaling from plan.training (per-rank batch for weak scaling, global batch for
//   strong; the plan's global batch must be per_rank_batch x `ranks` for weak, and at least
//   `ranks` for strong); lr = recipe lr * plan.training.lr_scale (linear_scaling off),
//   warmup = max(recipe, plan) warmup, ramping from 0 (warmup_from_zero);
//   schedule (step_size, gamma; cosine's min_lr), momentum, weight decay, seed from the recipe;
//   steps from `training.steps`, or epochs x ceil(train samples / global batch);
// - device "gpu" when the recipe's comm.backend is nccl (recipes have no device key), else
//   "cpu";
// - bucket_bytes, overlap from plan.training; algorithms from plan.collectives allreduce rules,
//   [min, max) ranges becoming "at most max - 1" ranges, a ring's segment_bytes carried (0:
//   comm's default), neighbours with the same algorithm and segment merged; a plan without
//   allreduce rules: ring everywhere;
// - checkpoint_every from the recipe; paths (metrics, checkpoint, trace) are left empty for the
//   caller to set.
// Errors (invalid_input, naming the recipe key or plan field): ranks < 1, a plan that fails
// validate_plan, a batch that does not fit the rank count, a plan algorithm the engine cannot
// run (nccl_*), a non-f32 dtype; io_error from train_samples() when an
// epochs-based recipe's data files cannot be read.
Result<TrainConfig> train_config_from(const recipes::Recipe& recipe, const recipes::Plan& plan,
                                      int ranks);

// Training samples the recipe's data yields (synthetic: samples minus the held-out share; file
// data: read from the files' headers, minus the held-out share unless `heldout: test`). Errors:
// unreadable data files (io_error, naming them).
Result<int64_t> train_samples(const recipes::Recipe& recipe);

}  // namespace dltune::engine
