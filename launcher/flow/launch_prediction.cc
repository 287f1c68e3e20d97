#include "launcher/flow/launch_prediction.h"

#include <algorithm>
#include <cstdlib>

#include "common/log.h"
#include "launcher/backend/slurm_backend.h"
#include "launcher/backend/ssh_backend.h"
#include "launcher/flow/predict_inputs.h"
#include "launcher/flow/predict_interference.h"
#include "planning/model_costs.h"
#include "recipes/model/partition.h"

#include "predict/machine_comm.h"

namespace dltune::launcher {
namespace {

// The candidate name the plan's ranks run at `bytes` ("ring/262144", "hier", ...).
std::string plan_candidate(const recipes::Plan& plan, double bytes) {
  auto rule = plan.algorithm_for(recipes::Collective::kAllreduce, static_cast<uint64_t>(bytes));
  if (!rule) return "ring";
  std::string name(recipes::algorithm_name(rule->algo));
  if (rule->segment_bytes > 0) name += "/" + std::to_string(rule->segment_bytes);
  return name;
}

// The first node of each stage but the first (the cuts) of a pipelined layout in `graph`;
// empty for data parallelism. Error: the layout's partition does not match the graph.
Result<std::vector<int>> stage_cuts(const recipes::Graph& graph,
                                    const recipes::ParallelLayout& layout) {
  std::vector<int> cuts;
  if (!layout.pipelined()) return cuts;
  const recipes::GraphInfo info = recipes::analyze_graph(graph);
  auto firsts = recipes::partition_nodes(graph, info, layout.partition);
  if (!firsts || static_cast<int>(firsts->size()) != layout.stages)
    return invalid_input("the plan's stage cuts do not match the recipe's model");
  cuts.assign(firsts->begin() + 1, firsts->end());
  return cuts;
}

// A pipelined layout's prediction over `nodes` nodes into `out` (no scaling curve: that is
// drawn for data parallelism); why_not where the model cannot predict it.
void predict_pipeline(const predict::PredictRequest& r, int nodes,
                      const recipes::ParallelLayout& layout, int64_t replica_batch,
                      const std::vector<int>& cuts, LaunchPrediction& out) {
  predict::PipelineLayout pl;
  pl.stages = layout.stages;
  pl.microbatches = layout.microbatches;
  pl.replica_batch = static_cast<double>(replica_batch);
  pl.cuts = cuts;
  auto p = predict::predict_pipeline_layout(r, nodes, pl);
  if (!p) {
    out.why_not = p.error().message();
    return;
  }
  out.job = *p;
  out.ok = true;
  out.curve_note =
      "no scaling curve: the curve is drawn for data parallelism, and this plan "
      "is a " +
      std::to_string(layout.stages) + "-stage pipeline";
}

// The scaling curve from 1 to 1024 nodes, each a machine of its own, into out.curve with a
// note on what it assumes (an assumed network where none was measured here). `r` is the job's
// request; `machines` what the job's nodes were found to be.
void predict_curve(predict::PredictRequest r, const predict::MachineComm& mc, int nodes, int g_per,
                   const NodeMachines& machines, LaunchPrediction& out) {
  if (!mc.has_inter) {
    // No network was measured here: a 10 Gbit/s Ethernet link per node (the namespace
    // cluster's default), said so.
    r.comm.fabric.inter = {20e-6, g_per / 1.25e9, 0};
    r.comm.model_spread_basis += "; the assumed network's own error is unknown";
    out.curve_note =
        "across nodes: an assumed 10 Gbit/s, 20 us link per node (no inter-node "
        "sweep stored on this machine)";
  } else {
    out.curve_note = "across nodes: the inter-node fit of this machine's sweeps";
  }
  if (!mc.has_intra && g_per > 1) r.comm.fabric.intra = r.comm.fabric.inter;
  // The curve extrapolates to real nodes, each a machine of its own.
  if (r.nodes_per_machine > 1) {
    out.curve_note += "; the job's " + std::to_string(nodes) + " nodes were found to be " +
                      std::to_string(machines.machines) +
                      " machine(s), so its own prediction shares their cores, while the curve "
                      "takes every node as a machine of its own";
    r.nodes_per_machine = 1;
  }
  r.nodes.clear();
  for (int n = 1; n <= 1024; n *= 2) r.nodes.push_back(n);
  if (auto c = predict::predict_scaling(r)) out.curve = *c;
}

}  // namespace

NodeMachines ask_node_machines(bool slurm, int nodes, const std::vector<std::string>& hosts) {
  NodeMachines m;
  if ((!slurm && hosts.empty()) || nodes <= 1) return m;
  m.asked = true;
  const bool over_hosts = !hosts.empty();
  const std::vector<std::string> mine(
      hosts.begin(),
      hosts.begin() + std::min<ptrdiff_t>(nodes, static_cast<ptrdiff_t>(hosts.size())));
  auto n =
      over_hosts ? count_host_machines(mine, kNodeMachinesTimeoutMs) : count_node_machines(nodes);
  if (n && *n >= 1 && *n <= nodes) {
    m.machines = *n;
  } else {
    m.unknown_why = n ? std::string(over_hosts ? "the hosts" : "srun") + " named " +
                            std::to_string(*n) + " machines"
                      : n.error().message();
  }
  return m;
}

int nodes_per_machine(const NodeMachines& m, int nodes) {
  if (!m.asked || m.machines <= 0 || nodes <= 1) return 1;
  return (nodes + m.machines - 1) / m.machines;
}

std::string node_machines_note(const NodeMachines& m, int nodes, int ranks_per_node, int cores) {
  if (!m.asked) return "";
  const std::string n = "the job's " + std::to_string(nodes) + " nodes";
  if (m.machines <= 0) {
    return "could not tell whether " + n + " are separate machines (" + m.unknown_why +
           "): predicted as if they were";
  }
  if (m.machines >= nodes) {
    return n + " are " + std::to_string(m.machines) + " machines (distinct boot_ids)";
  }
  const int ranks = nodes_per_machine(m, nodes) * ranks_per_node;
  const std::string cores_text = std::to_string(cores) + " core" + (cores == 1 ? "" : "s");
  if (m.machines == 1) {
    return n + " are 1 machine (same boot_id)" +
           (cores > 0 ? ": " + std::to_string(ranks) + " ranks share its " + cores_text : "");
  }
  // ceil(nodes / machines) on the busiest machine when they do not divide evenly.
  return n + " are " + std::to_string(m.machines) + " machines (by boot_id)" +
         (cores > 0 ? std::string(": ") + (nodes % m.machines != 0 ? "up to " : "") +
                          std::to_string(ranks) + " ranks share each one's " + cores_text
                    : "");
}

LaunchPrediction LaunchPredictor::predict(const recipes::Plan& plan, bool with_curve) {
  LaunchPrediction out;
  const recipes::ParallelLayout& layout = plan.parallel;
  // A pipeline's node times are profiled at its micro-batch (small batches cost more per
  // sample); data parallelism's at the per-rank batch.
  const int64_t replica_batch = std::max<int64_t>(1, plan.training.per_rank_batch);
  const int64_t batch = layout.pipelined() ? (replica_batch + layout.microbatches - 1) /
                                                 std::max(1, layout.microbatches)
                                           : replica_batch;
  auto cuts = stage_cuts(recipe_.model.graph, layout);
  if (!cuts) {
    out.why_not = cuts.error().message();
    return out;
  }
  auto model = planning::model_costs(recipe_.model.graph, recipe_.name);
  if (!model) {
    out.why_not = model.error().message();
    return out;
  }
  // Profiled once per batch, precision and kernel choice.
  const RankCompute how{plan.training.precision, plan.training.kernels};
  const std::string key =
      std::to_string(batch) + " " + how.precision + " " + nlohmann::json(how.kernels).dump();
  if (!compute_.count(key) && !compute_error_.count(key)) {
    // On the rank's threads, as it trains (issue 38: one thread predicted resnet20 on one rank
    // of this 2-core machine at 812 ms a step; it trained on both cores in 222 ms), with its
    // precision and kernels.
    // As many at once as the job's ranks share this machine's cores (issue 42: one rank alone
    // predicted resnet20's 2 ranks at 995 samples/s on this 2-core machine; they trained at 674).
    const int sharing = static_cast<int>(job_.ranks_per_node) *
                        nodes_per_machine(machines_, static_cast<int>(job_.nodes));
    auto c = profile_here(path_, true, static_cast<int>(batch), 3, *model, job_.threads_per_rank,
                          how, profile_copies(sharing, job_.threads_per_rank, cores_));
    if (c) {
      compute_[key] = *c;
    } else {
      compute_error_[key] = c.error().message();
    }
  }
  if (compute_error_.count(key)) {
    out.why_not = compute_error_[key];
    return out;
  }
  const int nodes = static_cast<int>(job_.nodes), g_per = static_cast<int>(job_.ranks_per_node);
  predict::MachineComm mc = predict::machine_comm(rows_, fits_, g_per);
  predict::PredictRequest r;
  r.model = std::move(*model);
  r.compute = compute_[key];
  r.per_node = g_per;
  r.bucket_bytes = std::max<uint64_t>(4, plan.training.bucket_bytes);
  r.overlap = plan.training.overlap;
  r.cores_per_node = cores_;
  r.threads_per_rank = job_.threads_per_rank;
  r.nodes_per_machine = nodes_per_machine(machines_, nodes);
  if (r.nodes_per_machine == 1) {
    auto i = pick_interference(interference_, job_.threads_per_rank, static_cast<int>(batch));
    if (i) r.interference = std::move(*i);
  }
  out.machines_note = node_machines_note(machines_, nodes, g_per, cores_);
  r.comm = mc.source;
  r.comm.plan_shape = {nodes, g_per};
  r.comm.plan_algo = [plan](double bytes) { return plan_candidate(plan, bytes); };
  const bool measured_here = r.comm.measured.count({nodes, g_per}) > 0;
  if (nodes * g_per > 1 && !measured_here &&
      ((g_per > 1 && !mc.has_intra) || (nodes > 1 && !mc.has_inter))) {
    out.why_not = "no allreduce model of this shape (no sweep of it, no level fit)";
    return out;
  }
  out.compute_note = r.compute.source;
  out.comm_note = measured_here ? "this shape's sweep with the plan's algorithm choices"
                                : "the per-level fits of this machine's sweeps";
  if (!measured_here && mc.intra_free) {
    out.comm_note += " (no one-node sweep: the inter-node fit carries the node-local part)";
  }
  out.single_sps = predict::single_device_sps(r.compute);
  if (layout.pipelined()) {
    predict_pipeline(r, nodes, layout, replica_batch, *cuts, out);
    if (out.ok) out.interval_note = predict::interval_note(r, {out.job});
    return out;
  }
  r.nodes = {nodes};
  auto at_job = predict::predict_scaling(r);
  if (!at_job) {
    out.why_not = at_job.error().message();
    return out;
  }
  out.job = at_job->front();
  out.ok = true;
  out.interval_note = predict::interval_note(r, *at_job);
  if (with_curve) predict_curve(std::move(r), mc, nodes, g_per, machines_, out);
  return out;
}

void LaunchPredictor::load_stored_interference(const tuner::db::Layers& layers,
                                               const topology::Topology& topo) {
  std::string skipped;
  set_stored_interference(stored_interference(
      layers, interference_key(topo, recipe_.model.graph, static_cast<int>(job_.ranks_per_node)),
      &skipped));
  if (!skipped.empty()) {
    DLTUNE_LOG(kWarn, "launch") << skipped;
  }
}

AllreduceBound allreduce_bound(uint64_t gradient_bytes, int nodes, int ranks_per_node,
                               double copy_gbs, const std::vector<predict::LevelFit>& fits) {
  AllreduceBound b;
  const double n = static_cast<double>(gradient_bytes);
  const double g = std::max(1, ranks_per_node);
  if (g > 1 && copy_gbs > 0) b.intra_s = (g - 1) / g * n / (copy_gbs * 1e9);
  if (nodes > 1) {
    const predict::LevelFit* best = nullptr;
    for (const predict::LevelFit& f : fits) {
      if (f.level != "inter" || f.link.beta_s_per_b <= 0) continue;
      if (best == nullptr || std::abs(f.ranks_per_node - ranks_per_node) <
                                 std::abs(best->ranks_per_node - ranks_per_node)) {
        best = &f;
      }
    }
    if (best != nullptr) {
      b.node_gbps = best->ranks_per_node / best->link.beta_s_per_b / 1e9;
      b.inter_s = 2.0 * (nodes - 1) / nodes * n / (b.node_gbps * 1e9);
      b.inter_known = true;
    }
  }
  b.bound_s = std::max(b.intra_s, b.inter_s);
  return b;
}

nlohmann::json prediction_json(const LaunchPrediction& p) {
  if (!p.ok) return {{"error", p.why_not}};
  nlohmann::json j = {{"step_ms", p.job.step_s * 1e3},
                      {"compute_ms", p.job.compute_s * 1e3},
                      {"exposed_comm_ms", p.job.exposed_comm_s * 1e3},
                      {"throughput_sps", p.job.throughput_sps},
                      {"scaling_efficiency", p.job.scaling_efficiency},
                      {"algorithm", p.job.algorithm},
                      {"single_device_sps", p.single_sps},
                      {"compute_source", p.compute_note},
                      {"comm_source", p.comm_note}};
  const predict::Prediction& job = p.job;
  j["step_ms_range"] = {job.step_range.lo * 1e3, job.step_range.hi * 1e3};
  j["throughput_sps_range"] = {job.throughput_range.lo, job.throughput_range.hi};
  j["scaling_efficiency_range"] = {job.efficiency_range.lo, job.efficiency_range.hi};
  j["interval_note"] = p.interval_note;
  if (!job.interference.empty()) {
    j["overlap"] = {{"interference", job.interference},
                    {"overlapped_ms", job.overlapped_s * 1e3},
                    {"compute_slowed_ms", job.compute_slowed_s * 1e3}};
  }
  nlohmann::json curve = nlohmann::json::array();
  for (const auto& c : p.curve) {
    curve.push_back({{"nodes", c.nodes},
                     {"ranks", c.ranks},
                     {"step_ms", c.step_s * 1e3},
                     {"exposed_comm_ms", c.exposed_comm_s * 1e3},
                     {"throughput_sps", c.throughput_sps},
                     {"scaling_efficiency", c.scaling_efficiency},
                     {"algorithm", c.algorithm}});
  }
  j["scaling"] = std::move(curve);
  j["scaling_note"] = p.curve_note;
  if (!p.machines_note.empty()) j["machines_note"] = p.machines_note;
  return j;
}

}  // namespace dltune::launcher
