// What the models predict for a launch, before it runs: the plan's step time and throughput
// at the job's shape (the plan's own allreduce choices on the shape's measured sweep, or the
// per-level fits), and the scaling curve of the same per-rank work from 1 to 1,024 nodes for
// the report. One rank's compute is measured once (dltune-worker profile of the recipe at the
// plan's per-rank batch, a few steps) and reused. The summary sets it beside what the launch
// measured; the tuner stores the throughput as the plan's prediction.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recipes/plan.h"
#include "recipes/recipe.h"
#include "topology/topology.h"
#include "tuner/db/lookup.h"
#include "tuner/db/records.h"

#include "predict/level_fit.h"
#include "predict/predict.h"

namespace dltune::launcher {

struct LaunchPrediction {
  bool ok = false;
  std::string why_not;  // when !ok
  predict::Prediction job;
  std::vector<predict::Prediction> curve;  // 1, 2, 4, ... 1024 nodes
  std::string compute_note, comm_note, curve_note;
  std::string machines_note;  // what machines the job's nodes are ("" with one node)
  std::string interval_note;  // what job's intervals cover (predict::interval_note)
  double single_sps = 0;
};

// Which machines the job's nodes are. Slurm nodes may be network namespaces of one host (the
// test cluster of tests/slurm/netns_cluster.sh), whose ranks then share that host's cores;
// the predictions must know, or they take every node as a computer of its own.
struct NodeMachines {
  bool asked = false;       // asked (slurm backend or hosts, more than one node)
  int machines = 0;         // distinct machines among the job's nodes; 0: unknown
  std::string unknown_why;  // why unknown, when asked
};
// Asks the allocation (launcher/slurm_backend.h's count_node_machines, one short srun step, at
// most kNodeMachinesTimeoutMs) when `slurm` and nodes > 1, or the first `nodes` of `hosts`
// (-H / --hostfile: ssh_backend.h's count_host_machines, one rank on each); otherwise asks
// nothing. Never fails: an error makes the answer unknown, saying why.
NodeMachines ask_node_machines(bool slurm, int nodes, const std::vector<std::string>& hosts = {});
// How many of the job's `nodes` nodes share one machine's cores: ceil(nodes / machines), 1
// when unknown or not asked (each node a machine of its own).
int nodes_per_machine(const NodeMachines& m, int nodes);
// The prediction's line about it, e.g. "the job's 2 nodes are 1 machine (same boot_id): 4
// ranks share its 2 cores"; "" when not asked. `cores` is a machine's (0: unknown).
std::string node_machines_note(const NodeMachines& m, int nodes, int ranks_per_node, int cores);

class LaunchPredictor {
 public:
  // `rows`: the job shape's sweep; `fits`: the machine's level fits (all shapes).
  LaunchPredictor(recipes::Recipe recipe, std::string recipe_path, recipes::JobShape job,
                  int cores_per_node)
      : recipe_(std::move(recipe)),
        path_(std::move(recipe_path)),
        job_(job),
        cores_(cores_per_node) {}
  void set_models(std::vector<tuner::db::Measurement> rows, std::vector<predict::LevelFit> fits) {
    rows_ = std::move(rows);
    fits_ = std::move(fits);
  }
  // Which machines the job's nodes are (ask_node_machines(), asked once per launch): the job's
  // prediction shares a machine's cores among the ranks of all its nodes; the curve's nodes
  // stay machines of their own (real nodes beyond the job's), its note says so.
  void set_node_machines(NodeMachines m) { machines_ = std::move(m); }
  // This machine's stored interference measurements of the job's model and ranks per node
  // (predict_interference.h's stored_interference()): the prediction uses the one of the job's
  // threads and nearest batch instead of the assumption by kind, where each node is a machine of
  // its own (the measurement's ranks had the machine to themselves).
  void set_stored_interference(std::vector<tuner::db::InterferenceRecord> rows) {
    interference_ = std::move(rows);
  }
  // The same, read from the databases of `layers` for the job's model and ranks per node on
  // `topo` (the machine the ranks run on); rows a database holds malformed are skipped with a
  // warning in the log.
  void load_stored_interference(const tuner::db::Layers& layers, const topology::Topology& topo);
  // The prediction for `plan` (never fails: !ok says why).
  LaunchPrediction predict(const recipes::Plan& plan, bool with_curve);

 private:
  recipes::Recipe recipe_;
  std::string path_;
  recipes::JobShape job_;
  int cores_ = 0;
  NodeMachines machines_;
  std::vector<tuner::db::Measurement> rows_;
  std::vector<predict::LevelFit> fits_;
  std::vector<tuner::db::InterferenceRecord> interference_;
  // By per-rank batch, precision and kernels.
  std::map<std::string, predict::ComputeProfile> compute_;
  std::map<std::string, std::string> compute_error_;
};

// The gradient allreduce's lower bound per level. Inside a node (the memory level): each rank
// moves (G-1)/G of the gradient through a core at copy_gbs (launch_summary.cc explains the
// factor). Across N nodes (the network level): every node must send and receive 2 (N-1)/N of
// the gradient through its links (Patarasuk and Yuan's bound for bandwidth-optimal allreduce),
// at the node bandwidth the inter-node fit measured (G ranks / beta). The bound is the larger of
// the two: a pipelined hierarchy overlaps them.
struct AllreduceBound {
  double intra_s = 0, inter_s = 0, bound_s = 0;
  double node_gbps = 0;  // measured network bandwidth of a node (0: no inter-node fit)
  bool inter_known = false;
};
AllreduceBound allreduce_bound(uint64_t gradient_bytes, int nodes, int ranks_per_node,
                               double copy_gbs, const std::vector<predict::LevelFit>& fits);

// summary.json's "prediction": {"step_ms", "compute_ms", "exposed_comm_ms", "throughput_sps",
// "scaling_efficiency", "step_ms_range": [lo, hi], "throughput_sps_range",
// "scaling_efficiency_range", "interval_note", "algorithm", "compute_source", "comm_source",
// "overlap": {"interference", "overlapped_ms", "compute_slowed_ms"} (data parallelism on 2 or
// more ranks: the overlap assumed, predict/predict.h), "scaling": [{"nodes",
// "ranks", "throughput_sps", "scaling_efficiency", "step_ms", "exposed_comm_ms"}],
// "scaling_note", "machines_note" (when the job's nodes were asked about)}, or {"error": why}.
nlohmann::json prediction_json(const LaunchPrediction& p);

}  // namespace dltune::launcher
