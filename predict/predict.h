// `dltune predict`'s engine: a model's step time, throughput and scaling efficiency at node
// counts from 1 to thousands, from one rank's compute (predict/compute.h) and an allreduce cost
// (measured curves at a shape the tuner swept, else predict/fabric.h's two-level model).
//
// For each node count N (ranks p = N x G): the data-parallel step of planning/step_time.h with
// the cheapest allreduce per bucket (or the one forced), and with --parallel pipeline / hybrid /
// auto the analytic pipeline layouts of planning/step_time.h (auto: the fastest of data and every
// stage count 2, 4, ... that divides p and that the model can be cut into; pipeline: one
// replica; hybrid: two replicas or more), cut and micro-batched as the engine's layout search
// does by default.
// Throughput is the global batch (B per rank) over the step; scaling efficiency is throughput
// over p x one device's throughput, one device being the same compute alone (no communication,
// no sharing of cores).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "planning/model_costs.h"
#include "planning/step_time.h"
#include "tuner/cost_model.h"

#include "predict/compute.h"
#include "predict/fabric.h"

namespace dltune::predict {

// The step-time model's pieces predict charges (planning/step_time.h).
using planning::CommTime;
using planning::DataParallelOptions;
using planning::Interference;
using planning::PipelineOptions;
using planning::StepPrediction;

enum class Parallel { kData, kPipeline, kHybrid, kAuto };
// Errors (invalid_input): not data, pipeline, hybrid or auto.
Result<Parallel> parse_parallel(const std::string& s);

// Where allreduce times come from.
struct CommSource {
  std::string description;                // said with every prediction
  Fabric fabric;                          // the model at every shape ...
  std::vector<AllreduceAlgo> algorithms;  // ... choosing among these
  std::optional<AllreduceAlgo> forced;    // --algo ALGO
  // ... except at shapes the tuner swept here: (nodes, ranks per node) -> candidate -> curve
  // ("ring", "ring/262144", "hier", ...).
  std::map<std::pair<int, int>, std::map<std::string, tuner::PiecewiseCost>> measured;
  // A plan's choice at a measured shape (the candidate its ranks will run at a size); the
  // fastest measured candidate where it names none there.
  std::pair<int, int> plan_shape{0, 0};
  std::function<std::string(double bytes)> plan_algo;
  // How far its times may be off, as relative half-widths, and why: at a shape with measured
  // curves, the spread its sweep measured there; elsewhere the model's (a fit's error, a
  // datasheet model's checked error; 0 for links as given).
  std::map<std::pair<int, int>, double> measured_spread;
  std::string measured_spread_basis = "the sweep's p10-p90 spread";
  double model_spread = 0;
  std::string model_spread_basis = "links as given";
  double spread(int nodes, int per_node) const;
  std::string spread_basis(int nodes, int per_node) const;
  // Every time below is multiplied by this (the ends of predict_scaling()'s intervals).
  double scale = 1;
  // Seconds of one allreduce of `bytes` on nodes x per_node ranks, and its algorithm.
  CommTime allreduce(double bytes, int nodes, int per_node) const;
  // A point-to-point message between two ranks (pipeline cuts).
  double send(double bytes, bool across_nodes, int per_node) const;

 private:
  CommTime unscaled_allreduce(double bytes, int nodes, int per_node) const;
};

struct PredictRequest {
  ModelCosts model;
  ComputeProfile compute;  // one rank at the per-rank batch
  int per_node = 1;
  std::vector<int> nodes;
  uint64_t bucket_bytes = 4 << 20;
  bool overlap = true;
  // Host collectives: the cores a node has (ranks x threads beyond them share cores: compute
  // slows by ranks x threads / cores, and overlap hides nothing once the ranks' communication
  // threads need the cores too). 0: devices (no sharing, overlap hides what fits).
  int cores_per_node = 0;
  // The threads each rank computes on (the compute profile's: it was measured on that many).
  int threads_per_rank = 1;
  // How many of the job's nodes are one machine (Slurm nodes that are network namespaces of
  // one host, launcher/backend/slurm_backend.h's count_node_machines): cores_per_node are then that
  // machine's cores, shared by per_node x min(N, nodes_per_machine) ranks at N nodes. 1: each
  // node is a machine of its own.
  int nodes_per_machine = 1;
  CommSource comm;
  Parallel parallel = Parallel::kData;
  // How computation and communication slow each other while both run (planning/overlap.h):
  // measured here (`dltune predict --interference measure`) or given. Empty: the default of the
  // kind, assumed_interference() below.
  Interference interference;
};

// What a GPU's compute loses to NCCL beside it, as published (a stated assumption, not
// measured here): Lee et al., "Characterizing Compute-Communication Overlap in GPU-Accelerated
// Distributed Deep Learning: Performance and Power Implications", arXiv:2507.03114 (2025),
// measured GPT and LLaMA training on 4 x A100, H100, MI250 and MI210: overlapped with
// communication, computation was 18.9 % slower on average than alone, 40.0 % at most. The
// communication's own slowdown is not given there and is taken as none. The interval's ends run
// from no slowdown to the 40 % maximum.
Interference gpu_interference();

// The interference the step model assumes at `nodes` nodes: the request's own where it has one;
// else, for devices (cores_per_node 0), gpu_interference(); for host ranks, their communication
// threads time-sharing the cores the compute threads leave: with F spare cores per rank at this
// shape (the cores less ranks x threads, over the ranks, at most 1), compute and communication
// each slow by 1 - F while both run (1: the serial sum; 0: a core each, taken as no
// interference, which only `--interference measure` can check).
Interference assumed_interference(const PredictRequest& request, int nodes);

// An interval [lo, hi] around a predicted value.
struct Range {
  double lo = 0, hi = 0;
};

struct Prediction {
  int nodes = 1, ranks = 1;
  double step_s = 0, compute_s = 0, exposed_comm_s = 0, comm_s = 0;
  double throughput_sps = 0, scaling_efficiency = 0;
  std::string algorithm, layout;
  int buckets = 0;
  double bubble = 0;
  std::vector<std::string> partition;  // a pipeline's: the first node of stages 1..S-1
  // The intervals the inputs' spreads give: the same layout predicted again with the compute
  // (request.compute.spread) and the communication (request.comm.spread() at this shape) each
  // at either end of its spread, the extremes over those four corners (the step grows with
  // both, so its ends are both slow and both fast; the efficiency's are mixed). The step
  // model's own error (contention it does not model) is not in them. The interference's ends
  // (Interference::end()) are corners too. lo == hi == the value when no input has a spread.
  double compute_spread = 0, comm_spread = 0;
  std::string comm_spread_basis;
  Range step_range, throughput_range, efficiency_range;
  // The overlap assumed (data parallelism; a pipeline reduces after backward): the
  // interference's source, the time both streams ran together and what compute lost to it.
  std::string interference;
  double overlapped_s = 0, compute_slowed_s = 0;
};

// One rank's throughput alone: batch / its compute step.
double single_device_sps(const ComputeProfile& compute);

// Errors (invalid_input): no node count, a node count < 1, per_node < 1, nodes_per_machine < 1.
Result<std::vector<Prediction>> predict_scaling(const PredictRequest& request);

// A plan's own pipeline layout (a launch's): S stages cut before the graph nodes `cuts`
// (S - 1 indices), M micro-batches of a replica's `replica_batch` samples, R = ranks / S.
struct PipelineLayout {
  int stages = 2, microbatches = 1;
  double replica_batch = 1;
  std::vector<int> cuts;
};
// That layout's step at `nodes` nodes (request.nodes is ignored), with predict_scaling()'s
// sharing of cores, collectives and sends. request.compute is best profiled at the micro-batch
// size (node times scale linearly from its batch). Errors: as predict_scaling(); invalid_input
// when the stages do not divide the ranks.
Result<Prediction> predict_pipeline_layout(const PredictRequest& request, int nodes,
                                           const PipelineLayout& layout);

// {"predictions": [{"nodes", "ranks", "step_ms", "compute_ms", "exposed_comm_ms",
// "throughput_sps", "scaling_efficiency", "algorithm", "layout", "comm_ms", "buckets",
// "step_ms_range": [lo, hi], "throughput_sps_range", "scaling_efficiency_range",
// "compute_spread", "comm_spread", "comm_spread_basis", "overlap": {"interference",
// "overlapped_ms", "compute_slowed_ms"}}]}, and for pipelines "bubble" and "partition" (the
// first node of stages 1..S-1).
nlohmann::json predictions_to_json(const std::vector<Prediction>& p);
// The table `dltune predict` prints: throughput and efficiency each with its interval.
std::string format_predictions(const std::vector<Prediction>& p);
// One line on what the intervals of `p` (predicted from `request`) cover, e.g. "compute +-3 %
// (the range of 3 timed steps); communication +-9 % (the sweep's p10-p90 spread) at 1 node(s),
// +-12 % (twice the inter fit's RMS error) at 2,4 node(s); overlap interference at the bucket
// size: compute +0.0 % to +40.0 %, communication +0.0 % to +0.0 % while both run (its source's
// range) [where the assumed interference has one]; each end puts ...; the step model's own
// error (contention it does not model) is not in them".
std::string interval_note(const PredictRequest& request, const std::vector<Prediction>& p);
// One line on the overlap the rows of `p` assumed: each distinct interference with the node
// counts it was assumed at (host ranks' cores differ with the node count on shared machines).
std::string interference_note(const std::vector<Prediction>& p);

}  // namespace dltune::predict
