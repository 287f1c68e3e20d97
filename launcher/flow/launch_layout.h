// The parallel layout of a launch: which replicas x stages, cuts, micro-batches, schedule and
// recomputation the job's ranks run, chosen in this process by the layout search
// (planning/layout_search.h) with the memory model of the engine's executor
// (engine/graph/batch_buffers.h: no kernel, no BLAS is linked). The layouts are ranked by FLOPs,
// or, when asked, by each node's cost timed on this machine by `dltune-worker profile --fit`
// (the one part that runs the engine's kernels, so it runs in the worker). A layout that does
// not fit a rank's memory is never launched: the error says by how much and what would fit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "planning/layout_search.h"
#include "recipes/plan.h"

namespace dltune::launcher {

struct LayoutQuery {
  std::string worker;       // dltune-worker: times the nodes, asks the GPU ("": neither)
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
  // When to search again with the model's nodes timed (`dltune-worker profile --fit`, about a
  // second for the bundled models) after the FLOP-based answer: never; kForTrials when it
  // holds a pipeline (the timings place its cuts, predict its throughput and decide which
  // layouts the trials measure); kForChoice only when, in addition, no data-parallel layout
  // fits (data parallelism goes first untimed where it fits, so only then do the timings
  // pick).
  enum class Measure { kNever, kForTrials, kForChoice };
  Measure measure = Measure::kNever;
};

struct LayoutAnswer {
  std::vector<planning::LayoutCandidate> candidates;  // best first, never empty
  std::vector<size_t> to_measure;                     // planning::layouts_to_measure(candidates)
  int64_t memory_limit = 0;                           // bytes per rank (0: none)
  std::string memory_source;                          // where the limit comes from
  std::string costs = "FLOPs";  // what the costs were: "FLOPs", "measured here (...)", or
                                // "FLOPs (why they were not measured)"
};

// Runs `dltune-worker profile ARGS --out FILE` (worker: its path) and returns the JSON it
// wrote; the worker's {"error": "..."} (or a non-zero exit) as an error of its exit code's kind
// (invalid_input for 2, else peer_failed).
Result<nlohmann::json> ask_worker(const std::string& worker, std::vector<std::string> args);

// The layouts `q` fits, best first. Errors: invalid_input when no layout fits (by how much, and
// what would fit) or the recipe's or the query's layout settings cannot be met or are unknown;
// the recipe's load errors; not_found for an unknown built-in model.
Result<LayoutAnswer> query_layouts(const LayoutQuery& q);

// The layouts the recipe tuner's trials measure beside plain data parallelism, from
// query_layouts()'s answer for the tuner's reference batch: the pipelines and the offloaded
// data parallelism (GPU) of answer.to_measure (planning::layouts_to_measure(): promising
// against the best predicted), best first. `data_parallel_fits`: whether one candidate is data
// parallel (one stage) without offload, i.e. plain data parallelism fits a rank's memory.
struct TrialLayouts {
  std::vector<recipes::ParallelLayout> layouts;
  bool data_parallel_fits = true;
};
TrialLayouts tuning_layouts(const LayoutAnswer& answer);

// Lays `plan` over its job: plan->parallel becomes the best candidate for the plan's batch
// (weak scaling: per_rank_batch per replica, the global batch following the replica count;
// strong: the global batch split over the replicas). A plan that already carries a pipeline
// layout (tuned with one, or resumed) keeps it. Errors: as query_layouts.
Status apply_layout(const LayoutQuery& base, recipes::Plan* plan);

// A candidate for people's scripts (`dltune model show --json`'s "memory"): {"layout": the
// Plan's own "parallel" section (recipes/plan_json.cc), "replica_batch", "stages":
// [{"first_node", "terms": planning::memory_json()}]}.
nlohmann::json candidate_json(const planning::LayoutCandidate& c);

}  // namespace dltune::launcher
