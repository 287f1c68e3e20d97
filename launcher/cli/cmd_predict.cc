// `dltune predict`: a model's step time, throughput and scaling efficiency from one node to
// thousands, from this machine's measurements or published specifications (predict/).
//
//   dltune predict RECIPE|MODEL --nodes N[,N...] [--per-node G] [--batch B] [--device NAME]
//                  [--single-sps X] [--intra GBPS[,US]] [--inter GBPS[,US]] [--topo XML]
//                  [--algo auto|ALGO] [--parallel data|pipeline|hybrid|auto] [--bucket BYTES]
//                  [--no-overlap] [--interference measure|assumed|none|C[,M]] [--db PATH]
//                  [--json]
//
// Compute: --single-sps (one device's published throughput at the batch), else --device (the
// table's peak x its fraction), else measured here (dltune-worker profile). Communication:
// --topo, then --intra / --inter, else this machine's tuning database (measured sweeps at the
// shapes it has, level fits elsewhere). Overlap: the buckets reduced during backward, slowing
// and slowed by it as --interference says (measured here and stored, none, given), else as this
// machine's stored measurement of the same model and shape says, else as assumed by kind
// (predict/predict.h's assumed_interference(): a published figure for GPUs, the cores left to the
// communication threads for host ranks); the table's header says which. --json:
// {"predictions": [{"nodes", "ranks", "step_ms", "compute_ms", "exposed_comm_ms", "throughput_sps",
// "scaling_efficiency", "algorithm", ..., "throughput_sps_range", ...}], ..., "interval_note",
// "note", "trust_note"}; every row carries the interval its inputs' spreads give
// (predict/predict.h's Prediction), and the table says what they cover; for a device's compute
// the last line (`trust_note`) says how far the model held against published results. "note" (for a
// device's compute) says that pipeline rows are a what-if, as the GPU engine trains data-parallel
// layouts only. Bad input (an unknown device or model, a node count < 1, a topology file that does
// not parse, no model for a shape asked) exits 2 with one sentence.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/cli/commands.h"
#include "launcher/flow/predict_inputs.h"

namespace dltune::cli {
namespace {

struct PredictCli {
  launcher::PredictOptions o;
  std::string nodes;
  bool json = false;
};

// Set when the compute is a device's (--device, --single-sps) and a prediction lays the model
// out in pipeline stages, which dltune's GPU engine does not run: those rows are what the
// hardware could do, not a plan `dltune launch` would carry out there.
std::string gpu_pipeline_note(const launcher::PredictOptions& o,
                              const std::vector<predict::Prediction>& ps) {
  if (o.device.empty() && o.single_sps <= 0) return "";
  const bool pipelined = std::any_of(ps.begin(), ps.end(), [](const predict::Prediction& p) {
    return !p.partition.empty() || p.bubble > 0;
  });
  if (!pipelined) return "";
  return "pipeline layouts here are a what-if for the hardware: dltune's GPU engine trains "
         "data-parallel layouts only (optimizer state offloaded where needed); its pipeline "
         "stages run on the CPU engine";
}

// How far a device's rows can be trusted, from bench/predict's check of the model against
// published multi-GPU results (bench/predict/README.md; `bench/predict/run.sh --parts
// published` measures it again): "" for compute measured here, whose rows the launch's own
// prediction-against-measurement checks.
std::string device_trust_note(const launcher::PredictOptions& o) {
  if (o.device.empty() && o.single_sps <= 0 && o.topo.empty()) return "";
  return "how far to trust these rows: against published multi-GPU results the model's scaling "
         "efficiency was within 7.3 points of those it was calibrated on (Horovod, Goyal et "
         "al.) and 4 to 28 points above held-out ones it never saw (TensorFlow's DGX-1 table, 4 "
         "and 8 P100s: a framework's per-call costs it does not model); read an efficiency near "
         "100 % as an upper bound (bench/predict/README.md)";
}

int run_predict(const PredictCli& c) {
  launcher::PredictOptions o = c.o;
  auto nodes = launcher::parse_node_list(c.nodes);
  if (!nodes) return report_error("predict", nodes.error());
  o.nodes = *nodes;
  auto in = launcher::resolve_predict_inputs(o);
  if (!in) return report_error("predict", in.error());
  auto p = predict::predict_scaling(in->request);
  if (!p) return report_error("predict", p.error());
  const auto& r = in->request;
  const std::string note = gpu_pipeline_note(o, *p);
  const std::string trust = device_trust_note(o);
  if (c.json) {
    nlohmann::json j = predict::predictions_to_json(*p);
    j["model"] = in->model_name;
    j["batch"] = r.compute.batch;
    j["per_node"] = r.per_node;
    j["threads_per_rank"] =
        r.cores_per_node > 0 ? nlohmann::json(r.threads_per_rank) : nlohmann::json(nullptr);
    j["parameters"] = r.model.parameters;
    j["single_device_sps"] = predict::single_device_sps(r.compute);
    j["compute_source"] = in->compute_note;
    j["comm_source"] = in->comm_note;
    j["overlap"] = in->overlap_note;
    j["interference"] = predict::interference_note(*p);
    if (!in->interference_stored.empty()) j["interference_stored"] = in->interference_stored;
    j["interval_note"] = predict::interval_note(r, *p);
    if (!note.empty()) j["note"] = note;
    if (!trust.empty()) j["trust_note"] = trust;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  // Threads are a host rank's (its compute measured here on that many); a device computes.
  const std::string threads =
      r.cores_per_node > 0 ? " x " + std::to_string(r.threads_per_rank) + " thread(s)" : "";
  std::printf("dltune predict: %s, per-rank batch %d, %d rank(s)%s per node, %.1f M parameters\n",
              in->model_name.c_str(), r.compute.batch, r.per_node, threads.c_str(),
              r.model.parameters / 1e6);
  std::printf("  compute        %s\n", in->compute_note.c_str());
  std::printf("  communication  %s\n",
              in->comm_note.empty() ? "none needed" : in->comm_note.c_str());
  std::printf("  overlap        %s\n", in->overlap_note.c_str());
  const std::string interference = predict::interference_note(*p);
  std::printf("  interference   %s\n",
              interference.empty() ? "none (no overlap at these shapes)" : interference.c_str());
  if (!in->interference_stored.empty())
    std::printf("                 %s\n", in->interference_stored.c_str());
  std::printf("\n");
  std::printf("%s", predict::format_predictions(*p).c_str());
  std::printf("\nintervals: %s\n", predict::interval_note(r, *p).c_str());
  if (!trust.empty()) std::printf("trust: %s\n", trust.c_str());
  if (!note.empty()) std::printf("\nnote: %s\n", note.c_str());
  return 0;
}

}  // namespace

void setup_predict(CLI::App& app, int* exit_code) {
  auto c = std::make_shared<PredictCli>();
  auto* cmd = app.add_subcommand(
      "predict",
      "Predict step time, throughput and scaling efficiency from 1 to thousands of nodes");
  cmd->add_option("target", c->o.target, "a built-in model (dltune model list) or a recipe")
      ->required();
  cmd->add_option("--nodes", c->nodes, "node counts, e.g. 1,8,64,512")->required();
  cmd->add_option("--per-node", c->o.per_node,
                  "ranks per node (default: the topology's GPUs, 8 with --device, else the "
                  "recipe's)");
  cmd->add_option("--batch", c->o.batch, "per-rank batch (default: the recipe's, else 32)");
  cmd->add_option("--device", c->o.device, "p100 | v100 | a100 | h100 | h200 (peak x fraction)");
  cmd->add_option("--single-sps", c->o.single_sps,
                  "one device's throughput at the batch (samples/s), e.g. a published figure");
  cmd->add_option("--intra", c->o.intra, "per-rank bandwidth inside a node: GBPS[,US]");
  cmd->add_option("--inter", c->o.inter, "per-rank network bandwidth between nodes: GBPS[,US]");
  cmd->add_option("--topo", c->o.topo, "an NCCL topology or hwloc XML file of one node");
  cmd->add_option("--algo", c->o.algo,
                  "auto | ring | rd | rabenseifner | tree | hier | hier_pipelined | shm")
      ->capture_default_str();
  cmd->add_option("--parallel", c->o.parallel, "data | pipeline | hybrid | auto")
      ->capture_default_str();
  cmd->add_option("--bucket", c->o.bucket, "gradient bucket size (default: the recipe's, 4MiB)");
  cmd->add_flag("--no-overlap", c->o.no_overlap, "reduce gradients after backward");
  cmd->add_option("--interference", c->o.interference,
                  "how compute and communication slow each other while both run: measure (here, "
                  "--per-node ranks; stored for later predictions), assumed (by kind), none, or "
                  "C[,M] (0.2: 20 %); default this machine's stored measurement, else assumed");
  cmd->add_option("--db", c->o.db, "tuning database with this machine's sweeps");
  cmd->add_option("--threads-per-rank", c->o.threads_per_rank,
                  "threads each rank computes on when measuring compute here (default: the "
                  "recipe's launch.threads_per_rank, else this node's cores shared among its "
                  "ranks, as a launch runs them)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--profile-steps", c->o.profile_steps, "timed steps when measuring compute here")
      ->capture_default_str();
  cmd->add_flag("--json", c->json, "print {\"predictions\": [...]} as JSON");
  cmd->callback([c, exit_code] { *exit_code = run_predict(*c); });
}

}  // namespace dltune::cli
