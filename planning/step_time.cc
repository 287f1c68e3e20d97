#include "planning/step_time.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "planning/buckets.h"
#include "planning/overlap.h"
#include "recipes/model/partition.h"

namespace dltune::planning {
namespace {

// Bytes carried per algorithm, for naming the one that carries most.
std::string main_algorithm(const std::map<std::string, double>& bytes) {
  std::string best;
  double most = -1;
  for (const auto& [name, b] : bytes) {
    if (b > most) most = b, best = name;
  }
  return best;
}

}  // namespace

double ComputeProfile::forward_total() const {
  return std::accumulate(forward_s.begin(), forward_s.end(), 0.0);
}
double ComputeProfile::backward_total() const {
  return std::accumulate(backward_s.begin(), backward_s.end(), 0.0);
}

PipelineStepTime pipeline_step_time(const PipelineStepInput& in) {
  const double slowest = *std::max_element(in.stage_s.begin(), in.stage_s.end());
  const double slots = std::max(1, in.microbatches) + static_cast<double>(in.stage_s.size()) - 1;
  PipelineStepTime t;
  t.compute_s = slots * slowest + in.update_s;
  t.comm_s = slots * in.send_s + in.allreduce_s + in.offload_s;
  t.step_s = slots * (slowest + in.send_s) + in.allreduce_s + in.update_s + in.offload_s;
  t.bubble = (static_cast<double>(in.stage_s.size()) - 1) / slots;
  return t;
}

std::vector<double> stage_sums(const std::vector<double>& node_cost,
                               const std::vector<int>& starts) {
  std::vector<double> out;
  for (size_t s = 0; s < starts.size(); ++s) {
    const int end = s + 1 < starts.size() ? starts[s + 1] : static_cast<int>(node_cost.size());
    double t = 0;
    for (int i = starts[s]; i < end; ++i) t += node_cost[static_cast<size_t>(i)];
    out.push_back(t);
  }
  return out;
}

StepPrediction data_parallel_step(const ModelCosts& model, const ComputeProfile& c,
                                  const AllreduceCost& allreduce, const DataParallelOptions& o) {
  StepPrediction p;
  p.layout = "data";
  const double k = o.compute_scale;
  const double fwd = c.forward_total() * k;
  const auto buckets = gradient_buckets(model.info, o.bucket_bytes);
  p.buckets = static_cast<int>(buckets.size());
  // Backward in reverse node order: segment j is node (nodes - 1 - j).
  const int nodes = static_cast<int>(c.backward_s.size());
  std::vector<double> segments;
  double backward_alone = fwd;
  for (int i = nodes - 1; i >= 0; --i) {
    segments.push_back(c.backward_s[static_cast<size_t>(i)] * k);
    backward_alone += segments.back();
  }
  std::vector<OverlapBucket> comm;
  std::map<std::string, double> carried;
  double serial_comm = 0;
  for (const GradBucket& b : buckets) {
    const double bytes = static_cast<double>(b.floats()) * 4;
    const CommTime a = allreduce(bytes);
    carried[a.algo] += bytes;
    serial_comm += a.seconds;
    // Without overlap every bucket waits for the end of backward.
    comm.push_back({a.seconds, bytes, o.overlap ? nodes - 1 - b.ready_after : -1});
  }
  p.comm_s = serial_comm;
  p.algorithm = main_algorithm(carried);
  const OverlapResult t = overlap_timeline(fwd, segments, comm, o.interference);
  p.overlapped_s = t.overlapped_s;
  const double scalar = allreduce(16).seconds;
  p.compute_s = t.compute_end + (c.optimizer_s + c.other_s) * k;
  p.compute_slowed_s = std::max(0.0, t.compute_end - backward_alone);  // (rounding below 0)
  p.exposed_comm_s = std::max(0.0, t.comm_end - t.compute_end) + scalar;
  p.step_s = p.compute_s + p.exposed_comm_s;
  return p;
}

Result<StepPrediction> pipeline_step(const ModelCosts& model, const ComputeProfile& c,
                                     const std::function<CommTime(double, int)>& stage_allreduce,
                                     const SendCost& send, const PipelineOptions& o) {
  const int S = std::max(1, o.stages), M = std::max(1, o.micro_batches);
  const int R = std::max(1, o.ranks / S);
  // A replica's batch is the data-parallel global batch over the replicas; a micro-batch is
  // 1/M of it. Node times scale linearly from the profiled per-rank batch.
  const double replica_batch =
      o.replica_batch > 0 ? o.replica_batch : static_cast<double>(c.batch) * o.ranks / R;
  const double micro = replica_batch / M;
  const double scale = micro / std::max(1, c.batch) * o.compute_scale;
  std::vector<double> cost(c.forward_s.size());
  for (size_t i = 0; i < cost.size(); ++i) cost[i] = (c.forward_s[i] + c.backward_s[i]) * scale;
  // Stage bounds [starts[s], starts[s + 1]): the plan's, or the engine's balanced cut.
  std::vector<int> starts = {0};
  if (static_cast<int>(o.cuts.size()) == S - 1) {
    starts.insert(starts.end(), o.cuts.begin(), o.cuts.end());
  } else {
    auto firsts = recipes::balanced_partition(model.info, cost, S);
    if (!firsts) {
      return std::move(firsts).error().wrap(model.name + " in " + std::to_string(S) + " stages");
    }
    starts = std::move(*firsts);
  }
  const std::vector<double> stage_s = stage_sums(cost, starts);
  starts.push_back(static_cast<int>(cost.size()));
  double slowest_params = 0, max_send = 0;
  for (size_t s = 0; s + 1 < starts.size(); ++s) {
    double params = 0;
    for (int i = starts[s]; i < starts[s + 1]; ++i)
      params += static_cast<double>(model.param_floats[static_cast<size_t>(i)]) * 4;
    slowest_params = std::max(slowest_params, params);
    if (s + 2 < starts.size()) {  // the cut after this stage: activations out, gradients back
      const int last = starts[s + 1] - 1;
      const double bytes =
          static_cast<double>(model.output_floats[static_cast<size_t>(last)]) * 4 * micro;
      const bool across = o.per_node < S && ((s + 1) % static_cast<size_t>(o.per_node)) == 0;
      max_send = std::max(max_send, 2 * send(bytes, across));
    }
  }
  const int used_stages = static_cast<int>(stage_s.size());
  const CommTime ar = R > 1 ? stage_allreduce(slowest_params, R) : CommTime{};
  PipelineStepInput in;
  in.stage_s = stage_s;
  in.send_s = max_send;
  in.microbatches = M;
  in.allreduce_s = ar.seconds;
  in.update_s = (c.optimizer_s + c.other_s) * o.compute_scale / used_stages;
  const PipelineStepTime t = pipeline_step_time(in);
  StepPrediction p;
  p.compute_s = t.compute_s;
  p.comm_s = t.comm_s;
  p.step_s = t.step_s;
  p.exposed_comm_s = p.step_s - p.compute_s;
  p.algorithm = R > 1 ? ar.algo : "none";
  p.bubble = t.bubble;
  p.layout = "pipeline " + std::to_string(used_stages) + " stages x " + std::to_string(R) +
             (R == 1 ? " replica, " : " replicas, ") + std::to_string(M) + " micro-batches";
  p.cuts.assign(starts.begin() + 1, starts.end() - 1);
  return p;
}

}  // namespace dltune::planning
