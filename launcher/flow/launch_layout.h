// The parallel layout of a launch: which replicas x stages, cuts, micro-batches, schedule and
// recomputation the job's ranks run, chosen by the memory model (engine/train/layout_search.h,
// run in `dltune-worker layout`: the launcher links no engine ops). A layout that does not fit a
// rank's memory is never launched: the error says by how much and what would fit.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "recipes/plan.h"

namespace dltune::launcher {

struct LayoutQuery {
  std::string worker;       // dltune-worker
  std::string recipe_path;  // the recipe file ("" with `model`)
  int ranks = 1, ranks_per_node = 0;
  int64_t batch = 0;         // samples per step; 0 = the recipe's
  bool per_replica = false;  // batch is each replica's (weak scaling)
  std::string model, input;  // a built-in model instead of a recipe (input "" = its own)
  // Fixed layout settings (0 / "" = the recipe's, else free) and the optimizer ("" = recipe's).
  int stages = 0, microbatches = 0;
  std::string schedule, recompute, optimizer;
  std::string offload;     // "" (the recipe's), none or optimizer
  bool unlimited = false;  // no memory limit: every layout's terms, fitting or not
  // When to ask again with the model's nodes timed (`dltune-worker layout --measure`, about a
  // second for the bundled models) after the FLOP-based answer: never; kForTrials when it
  // holds a pipeline (the timings place its cuts, predict its throughput and decide which
  // layouts the trials measure); kForChoice only when, in addition, no data-parallel layout
  // fits (data parallelism goes first untimed where it fits, so only then do the timings
  // pick).
  enum class Measure { kNever, kForTrials, kForChoice };
  Measure measure = Measure::kNever;
};

// The worker's answer (see engine/worker/layout.h): {"candidates": [...], "memory_limit", ...}.
// Errors: invalid_input with the worker's message when no layout fits or the recipe's layout
// settings cannot be met; io/internal errors when the worker cannot run.
Result<nlohmann::json> query_layouts(const LayoutQuery& q);

// The layouts the recipe tuner's trials measure beside plain data parallelism, from
// query_layouts()'s answer for the tuner's reference batch: the pipelines and the offloaded
// data parallelism (GPU) the worker marks "measure" (engine layouts_to_measure(): promising
// against the best predicted), best first; a candidate the answer cannot describe is left out.
// `data_parallel_fits`: whether one candidate is data parallel (one stage) without offload,
// i.e. plain data parallelism fits a rank's memory.
struct TrialLayouts {
  std::vector<recipes::ParallelLayout> layouts;
  bool data_parallel_fits = true;
};
TrialLayouts tuning_layouts(const nlohmann::json& answer);

// Lays `plan` over its job: plan->parallel becomes the best candidate for the plan's batch
// (weak scaling: per_rank_batch per replica, the global batch following the replica count;
// strong: the global batch split over the replicas). A plan that already carries a pipeline
// layout (tuned with one, or resumed) keeps it. Errors: as query_layouts.
Status apply_layout(const LayoutQuery& base, recipes::Plan* plan);

}  // namespace dltune::launcher
