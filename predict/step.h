// One training step's time, from one rank's compute (predict/compute.h) and the allreduce cost
// at the job's shape (predict/fabric.h, or measured curves).
//
// Data parallelism follows the engine (engine/train/trainer.h): forward, then backward node by
// node in reverse; each gradient bucket (predict/model_costs.h, the engine's order) is reduced
// on one communication thread as soon as backward has made it final, one bucket after another;
// the step waits for the last one, then updates. So the exposed communication is what the
// communication thread still has to do when backward ends. Where communication needs the same
// cores as compute (host collectives with as many ranks per node as cores), overlapping hides
// nothing: `overlap_efficiency` 0 charges every bucket in full, 1 (accelerators, NIC offload)
// hides what fits under backward, values between interpolate. Each step also reduces one scalar
// (the loss and stop flag) after the update.
//
// Pipeline and hybrid layouts: S stages of a contiguous cut (a plan's own, or, for `dltune
// predict --parallel`, the engine's balanced cut: recipes::balanced_partition over the places
// where one tensor crosses, on the nodes' compute at the micro-batch), R = ranks / S replicas,
// each replica's batch (the data-parallel global batch / R) in M micro-batches run as GPipe
// does: (M + S - 1) slots of the slowest stage's forward and backward of one micro-batch, so a
// bubble of (S - 1) / (M + S - 1), plus the activations and their gradients sent
// point-to-point at every cut in each slot, then the stage's gradients reduced among its
// replicas after backward (no overlap) and its share of the update. Memory is not checked.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/result.h"

#include "predict/compute.h"
#include "predict/fabric.h"
#include "predict/model_costs.h"

namespace dltune::predict {

// One allreduce: which algorithm, how long.
struct CommTime {
  std::string algo;
  double seconds = 0;
};
// The time and algorithm of one allreduce of `bytes` at the job's shape.
using AllreduceCost = std::function<CommTime(double bytes)>;
// The time to send `bytes` to the next stage; `across_nodes` when the two stages are on
// different nodes.
using SendCost = std::function<double(double bytes, bool across_nodes)>;

struct StepPrediction {
  double step_s = 0;
  double compute_s = 0;       // forward, backward, update and other, as slowed by sharing
  double exposed_comm_s = 0;  // step_s - compute_s
  double comm_s = 0;          // allreduce time in all (hidden or not)
  std::string algorithm;      // the allreduce algorithm carrying most of the bytes
  int buckets = 0;
  std::string layout;     // "data", "pipeline 4 stages x 2 replicas, 16 micro-batches"
  double bubble = 0;      // pipeline only
  std::vector<int> cuts;  // pipeline only: the first node of stages 1..S-1
};

struct DataParallelOptions {
  uint64_t bucket_bytes = 4 << 20;
  bool overlap = true;
  double overlap_efficiency = 1;  // see above
  double compute_scale = 1;       // slowdown of compute (ranks sharing cores)
};

StepPrediction data_parallel_step(const ModelCosts& model, const ComputeProfile& rank_compute,
                                  const AllreduceCost& allreduce, const DataParallelOptions& o);

struct PipelineOptions {
  int stages = 2;
  int micro_batches = 8;
  int ranks = 2;     // in all; stages divides it
  int per_node = 1;  // ranks per node: a replica's consecutive stages share a node when
                     // they fit in one
  double compute_scale = 1;
  // A plan's own layout, when given: each replica's samples per step (0: the data-parallel
  // global batch over the replicas, as below) and the first node of stages 1..S-1 (empty: cuts
  // balanced on the nodes' compute).
  double replica_batch = 0;
  std::vector<int> cuts;
};

// `rank_compute` is at the data-parallel per-rank batch B (the global batch is B x ranks).
// `stage_allreduce(bytes, replicas)` reduces one stage's gradients among its replicas.
// Errors (invalid_input): without the plan's cuts, a model with fewer than S - 1 places where
// one tensor crosses (the engine could not run it either), saying so.
Result<StepPrediction> pipeline_step(
    const ModelCosts& model, const ComputeProfile& rank_compute,
    const std::function<CommTime(double bytes, int replicas)>& stage_allreduce,
    const SendCost& send, const PipelineOptions& o);

}  // namespace dltune::predict
