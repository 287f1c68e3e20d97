// Choosing how a model is laid over the ranks: replicas x stages, the cuts, micro-batches,
// schedule and recomputation (HyPar-Flow, AxoNN, OC-DNN), from the memory model and a cost per
// graph node (measured forward + backward seconds per sample and per call, or FLOPs).
//
// How it decides. For a job of `ranks` ranks, every stage count S that divides the ranks (and
// the recipe allows) gives R = ranks / S replicas, each training global / R samples per step.
// For each S the stages are cut by dynamic programming over the graph's cut points so the
// slowest stage (its nodes' cost at S's micro-batch size) is as fast as possible
// (recipes::balanced_partition), vetoing cuts whose stage does not fit the memory limit;
// micro-batches default to min(replica batch, 4 S) (the 1F1B bubble (S-1)/(M+S-1) below 20 %), the
// schedule to 1F1B, and recomputation is switched on only where the stage would not fit without it;
// on the GPU engine the optimizer state moves to host memory (offload) likewise, tried before
// recomputation (its copies overlap nothing but cost no compute).
// A candidate's predicted step time is the step-time model's (planning/step_time.h:
// pipeline_step_time(), which `dltune predict` charges too): its slowest stage's cost times
// (M + S - 1) micro-batch slots, plus the largest stage's optimizer update, plus the gradient
// allreduce of its largest stage over its R replicas at `allreduce_bytes_per_s`, plus,
// offloaded, the optimizer state's round trip over the host link at `host_copy_bytes_per_s`;
// its throughput global / step time.
// Every candidate that fits is returned, best first; when none fits, the error says by how much the
// closest one misses and what would fit (fewer samples per replica, more stages, recomputation).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "planning/layout_memory.h"
#include "recipes/model/graph.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::planning {

// The compute rate FLOPs are turned into seconds at when no node was timed: good for ranking
// layouts, not for their throughput (tests/launch/data/deep-mlp.yaml's 2-stage pipeline trains
// at about 19 GFLOP/s a rank on this 2-core machine: 440 against the 176 samples/s predicted).
inline constexpr double kAssumedFlopsPerSecond = 1e10;

struct LayoutRequest {
  // The executor's buffers for a batch of a graph (engine::batch_buffers for the bundled
  // engine): the memory model's per-batch input. Required.
  BatchBuffersFn buffers;
  int ranks = 1;
  int64_t global_batch = 1;        // samples per step over all replicas
  bool batch_per_replica = false;  // weak scaling: global_batch is per replica (x R)
  int64_t memory_limit = 0;        // bytes per rank; 0 = no limit
  std::string optimizer = "sgd";
  recipes::ParallelConfig fixed;  // the recipe's training.parallel (auto fields are free)
  // Cost per graph node for one sample's forward + backward (seconds or FLOPs); empty: 3 x the
  // node's forward FLOPs (planning/model_costs.h). With measured costs, node_fixed_cost is each
  // node's cost per call whatever its batch (kernel launches, packing weights: what makes small
  // micro-batches dearer per sample); a stage's micro-batch of m samples costs sum(fixed + m x
  // cost).
  std::vector<double> node_cost;
  std::vector<double> node_fixed_cost;  // empty: none
  double cost_per_second = 0;           // cost units per second (0: kAssumedFlopsPerSecond FLOP/s)
  // The optimizer's cost per parameter per step (a stage updates its own), in the same units.
  double optimizer_cost_per_parameter = 0;
  double allreduce_bytes_per_s = 2e9;
  // The GPU engine (comm.backend nccl): the optimizer state may be offloaded to host memory
  // (fixed.offload auto or optimizer), its copies at this rate each way (PCIe 4 x16: ~20 GB/s).
  // It runs no pipeline stages yet: only data-parallel layouts are offered, and fixed stages
  // or a pipeline or hybrid mode are an error.
  bool gpu = false;
  double host_copy_bytes_per_s = 2e10;
  // The run checkpoints: a data-parallel CPU layout counts rank 0's snapshot for the background
  // write (planning/layout_memory.h).
  bool checkpoint_snapshot = false;
};

struct LayoutCandidate {
  recipes::ParallelLayout layout;  // reason, memory_bytes and predicted_sps set
  std::vector<StageMemory> stages;
  int64_t replica_batch = 0;
  double predicted_step_s = 0;
};

// The fitting candidates, best predicted throughput first (data parallelism first where the
// recipe leaves the layout open and it fits). Errors: invalid_input when the graph has
// problems or the recipe's fixed settings cannot be met; resource_exhausted-style
// invalid_input ("does not fit") when no layout fits the memory limit, saying by how much and
// what would fit; internal_error without request.buffers.
Result<std::vector<LayoutCandidate>> layout_candidates(const recipes::Graph& graph,
                                                       const LayoutRequest& request);

// Which of `candidates` (layout_candidates()'s answer, best first) the recipe tuner's trials
// measure: data parallelism where it fits, and the pipelines predicted at least
// kPromisingShare of the best candidate's throughput, at most kMeasuredPipelines of them, in
// order. Indices into `candidates`.
inline constexpr double kPromisingShare = 0.75;
inline constexpr size_t kMeasuredPipelines = 2;
std::vector<size_t> layouts_to_measure(const std::vector<LayoutCandidate>& candidates);

// "2 replicas x 3 stages (from conv1, layer2.0, layer3.0), 8 micro-batches, 1f1b, recompute"
// (", optimizer state in host memory" when offloaded).
std::string describe_layout(const recipes::ParallelLayout& l);

}  // namespace dltune::planning
