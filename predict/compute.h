// One rank's compute for one training step: per graph node the forward and backward seconds, and
// the optimizer's, for a per-rank batch. Three sources:
//   measured   dltune-worker profile on this machine (Model::set_profiling: each node's wall
//              time, median over timed steps) - what `dltune predict` uses by default;
//   rate       the node's forward FLOPs x batch at an effective FLOP rate (a device table's peak
//              x its fraction, predict/devices.h), backward taken as twice forward (two
//              matrix products per forward one);
//   throughput one device's published samples per second at the batch (--single-sps): the
//              rate model's split over nodes, scaled so the step takes batch / sps.
// How sure each is (ComputeProfile::spread): measured, half the range of the timed steps over
// their median; rate, kAssumedFractionSpread (the fraction of peak is an assumption); throughput,
// exact as given (0).
// The optimizer (rate and throughput sources) is a memory-bound pass over the parameters:
// SGD with momentum reads and writes 20 bytes a parameter, AdamW 28, at the device's memory
// bandwidth; zero when not known.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "planning/model_costs.h"
#include "planning/step_time.h"

namespace dltune::predict {

// The model and compute of the step-time model (planning/step_time.h), made here.
using planning::ComputeProfile;
using planning::ModelCosts;

// The rate model's relative half-width. The table's fractions of peak (predict/devices.h) are
// each read off one kind of published run, rounded, and one network's rate on one GPU differs
// between frameworks, versions and batch sizes: +-25 % is an assumption, not a measurement, and
// every interval it widens says so.
inline constexpr double kAssumedFractionSpread = 0.25;

ComputeProfile profile_from_rate(const ModelCosts& model, int batch, double flops_per_s,
                                 double optimizer_s, std::string source);
// Precondition: sps > 0.
ComputeProfile profile_from_throughput(const ModelCosts& model, int batch, double sps,
                                       double optimizer_s, std::string source);
// The optimizer's seconds for `parameters` at `memory_gbps` ("sgd" or "adamw").
double optimizer_seconds(int64_t parameters, double memory_gbps, const std::string& optimizer);

// dltune-worker profile's JSON: {"model", "batch", "steps", "forward_s": [...], "backward_s":
// [...], "optimizer_s", "step_s", "step_samples_s": [...], "threads"} (per node, seconds per
// step at "batch"). The profile's spread is half the range of step_samples_s over their median
// (0 with fewer than two samples). Errors (invalid_input): missing fields, or a node count other
// than the model's.
Result<ComputeProfile> profile_from_json(const nlohmann::json& j, const ModelCosts& model,
                                         std::string source);

// The same compute at another per-rank batch: node times scale linearly with the batch (they
// are dominated by per-sample work at the batches profiled), the optimizer does not.
ComputeProfile at_batch(const ComputeProfile& p, int batch);

}  // namespace dltune::predict
