// A run that continues on another shape (issue 40: `dltune launch --resume RUN_DIR -n N` with
// N not the run's ranks, or another node count).
//
// What makes it possible: the checkpoint holds the whole model, its optimizer state and model
// state by the model's tensor order, whatever the layout that wrote it (a pipeline's rank 0
// gathers every stage's), so it loads into any layout; and the data order is a function of
// (seed, step, global batch) alone (engine/data/sampler.h), not of the rank count. So the run
// keeps its global batch: split over the new replicas, step s still trains on the same samples
// as it would have, none repeated or skipped, and the learning-rate schedule (its scale and
// warm-up, both chosen for that global batch) continues unchanged, as does the precision.
// Everything that belongs to the shape is chosen again: the collectives, buckets, threads and
// kernels (the database's plan for the new shape, else the recipe's own settings) and the
// layout (stages x replicas and micro-batches, by the memory model at the kept global batch:
// fewer ranks hold more samples each, so gradient accumulation may come in).
//
// A shape the global batch does not split over evenly is refused before a rank starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "recipes/plan.h"

namespace dltune::launcher {

// A run's change of shape, as the summary reports it.
struct Reshape {
  int from_nodes = 1, from_ranks = 1;  // the shape the run's plan was for
  int to_nodes = 1, to_ranks = 1;      // the shape it continues on
  int64_t global_batch = 0;            // kept
  std::string plan_source;             // where the new shape's settings came from ("cache", ...)
  std::vector<std::string> changes;    // what the new plan changed, one phrase each
};

// Whether a run planned as `old` must be planned again to run as `shape` (another node count or
// ranks per node; the threads per rank alone do not change the plan's layout).
bool needs_reshape(const recipes::Plan& old, const recipes::JobShape& shape);

// Refuses, before any rank starts, a shape `ranks` the run planned as `old` cannot continue on:
// its global batch does not split evenly over `ranks` replicas, or gives some no sample. The
// message names the rank counts that work. Errors: invalid_input.
Status check_reshape(const recipes::Plan& old, int ranks);

// The most ranks, fewer than `ranks` and at least `min_ranks` (at least 1), that a run planned as
// `old` can continue on: its global batch split evenly. 0 when there are none.
int fewer_ranks(const recipes::Plan& old, int ranks, int min_ranks);

// Makes `fresh` (the new shape's plan: the database's, or the recipe's own) continue the run
// planned as `old`: the global batch kept (strong scaling: split over the new replicas), the
// learning-rate scale, warm-up and precision kept; the layout reset to data parallelism over
// the new ranks for the layout search to choose again. Fills `r`'s global_batch and changes.
void carry_training(const recipes::Plan& old, recipes::Plan* fresh, Reshape* r);

// summary.json's "reshaped": {"from": {"nodes", "ranks"}, "to": {...}, "global_batch",
// "plan_source", "changes": [...]}.
nlohmann::json reshape_json(const Reshape& r);

// One line for the summary and the progress display: "from 2 ranks on 1 node to 1 rank on 1
// node; global batch 64 kept; the new shape's settings: the recipe's own (none cached for it);
// changed: samples per replica 32 -> 64" (or "the database's plan for it", "tuned for it
// (tune.restart_budget) and stored"). `r` as reshape_json() writes it.
std::string reshape_text(const nlohmann::json& r);

}  // namespace dltune::launcher
