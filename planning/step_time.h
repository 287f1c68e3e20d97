// One training step's time, from one rank's compute (per node, ComputeProfile) and what its
// communication costs: the one step-time model of the layout search (planning/layout_search.h)
// and of `dltune predict` (predict/predict.h), whose inputs are their own (FLOPs or timed nodes
// and a bandwidth; a device table and fitted allreduce curves).
//
// Data parallelism follows the engine (engine/train/trainer.h): forward, then backward node by
// node in reverse; each gradient bucket (planning/buckets.h, the trainer's own) is reduced
// on one communication thread as soon as backward has made it final, one bucket after another;
// the step waits for the last one, then updates. So the exposed communication is what the
// communication thread still has to do when backward ends. While a bucket is reduced during
// backward, the two slow each other as `interference` says (planning/overlap.h): none hides
// what fits under backward; compute and communication time-sharing one core (host collectives
// with as many ranks per node as cores) hide nothing. Each step also reduces one scalar (the
// loss and stop flag) after the update.
//
// Pipeline and hybrid layouts (pipeline_step_time(), which both callers charge): S stages of a
// contiguous cut, R = ranks / S replicas, each replica's batch in M micro-batches run as GPipe
// and 1F1B do: (M + S - 1) slots of the slowest stage's forward and backward of one
// micro-batch, so a bubble of (S - 1) / (M + S - 1) for balanced stages (planning/schedule.h
// simulates the schedules themselves), plus the activations and their gradients sent
// point-to-point at the slowest cut in each slot; then the stage's gradients reduced among its
// replicas after backward (no overlap), the largest stage's update, and an offloaded optimizer
// state's round trip to host memory. One stage is the same without a bubble. Memory is not
// checked here (planning/layout_memory.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "planning/model_costs.h"
#include "planning/overlap.h"

namespace dltune::planning {

// One rank's compute for one training step at a per-rank batch: per graph node the forward and
// backward seconds, and the optimizer's (predict/compute.h makes them from a device, a
// throughput or a profile measured here).
struct ComputeProfile {
  std::string source;  // said in every prediction: "measured here (...)", "device h100 (...)"
  int batch = 1;       // per-rank batch the times are for
  std::vector<double> forward_s, backward_s;  // per node
  double optimizer_s = 0;
  double other_s = 0;  // per step outside forward, backward and the update (input copy, loss)
  // How far the step time may be off, as a relative half-width (0.05: +-5 %), and why (said
  // with every interval). 0: taken as exact (a throughput as given).
  double spread = 0;
  std::string spread_basis;
  double forward_total() const;
  double backward_total() const;
  double step_s() const { return forward_total() + backward_total() + optimizer_s + other_s; }
};

// The pipeline step as above, in seconds.
struct PipelineStepInput {
  std::vector<double> stage_s;  // per stage: one micro-batch's forward + backward
  double send_s = 0;            // the slowest cut: one micro-batch's activations out and back
  int microbatches = 1;         // M
  double allreduce_s = 0;       // the largest stage's gradients among its replicas
  double update_s = 0;          // the update and other per-step work of the largest stage
  double offload_s = 0;         // the optimizer state to host memory and back
};
struct PipelineStepTime {
  double step_s = 0;
  double compute_s = 0;  // slots x the slowest stage, plus the update
  double comm_s = 0;     // the sends of every slot, the allreduce and the offload
  double bubble = 0;     // (S - 1) / (M + S - 1)
};
// Precondition: stage_s is not empty, microbatches >= 1.
PipelineStepTime pipeline_step_time(const PipelineStepInput& in);

// Each stage's sum of `node_cost` over its nodes [starts[s], starts[s + 1]) (the last to the
// end). Precondition: starts begins with 0, ascends, and is within node_cost.
std::vector<double> stage_sums(const std::vector<double>& node_cost,
                               const std::vector<int>& starts);

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
  double compute_s = 0;         // forward, backward, update and other, as slowed by sharing
                                // and by the overlap's interference
  double compute_slowed_s = 0;  // of compute_s: backward slowed by communication beside it
  double overlapped_s = 0;      // time during which a bucket was reduced while backward ran
  double exposed_comm_s = 0;    // step_s - compute_s
  double comm_s = 0;            // allreduce time in all (hidden or not)
  std::string algorithm;        // the allreduce algorithm carrying most of the bytes
  int buckets = 0;
  std::string layout;     // "data", "pipeline 4 stages x 2 replicas, 16 micro-batches"
  double bubble = 0;      // pipeline only
  std::vector<int> cuts;  // pipeline only: the first node of stages 1..S-1
};

struct DataParallelOptions {
  uint64_t bucket_bytes = 4 << 20;
  bool overlap = true;
  Interference interference;  // see above; empty: perfect overlap
  double compute_scale = 1;   // slowdown of compute (ranks sharing cores)
};

// The data-parallel step above: `model`'s buckets of o.bucket_bytes, each reduced by
// `allreduce`.
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

// `dltune predict --parallel`'s pipeline: pipeline_step_time() of the plan's cuts or, without
// them, the engine's balanced cut (recipes::balanced_partition over the places where one tensor
// crosses, on the nodes' compute at the micro-batch), each replica's batch being the
// data-parallel global batch / R unless given. `rank_compute` is at the data-parallel per-rank
// batch B (the global batch is B x ranks); node times scale linearly from it.
// `stage_allreduce(bytes, replicas)` reduces one stage's gradients among its replicas; `send`
// carries the activations at each cut.
// Errors (invalid_input): without the plan's cuts, a model with fewer than S - 1 places where
// one tensor crosses (the engine could not run it either), saying so.
Result<StepPrediction> pipeline_step(
    const ModelCosts& model, const ComputeProfile& rank_compute,
    const std::function<CommTime(double bytes, int replicas)>& stage_allreduce,
    const SendCost& send, const PipelineOptions& o);

}  // namespace dltune::planning
