// What `dltune predict` (cmd_predict.cc) and the launch summary feed predict/predict.h: the
// model, one rank's compute and the allreduce costs, each from the source the options name.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "recipes/recipe.h"

#include "predict/predict.h"

namespace dltune::launcher {

struct PredictOptions {
  std::string target;  // a built-in model or a recipe (file or bundled name)
  std::vector<int> nodes;
  int per_node = 0;          // 0: the topology file's GPUs, 8 for a device, else the recipe's
  int batch = 0;             // 0: the recipe's per-rank batch, else 32
  std::string device;        // --device
  double single_sps = 0;     // --single-sps
  std::string intra, inter;  // "GBPS[,US]"
  std::string topo;          // --topo FILE
  std::string algo = "auto";
  std::string parallel = "data";
  std::string bucket;  // --bucket BYTES ("" : the recipe's, else 4 MiB)
  bool no_overlap = false;
  // --interference: "" (this machine's stored measurement, else assumed by kind), measure,
  // assumed, none or C[,M] (launcher/flow/predict_interference.h)
  std::string interference;
  std::string db;  // --db (this machine's measured models)
  int profile_steps = 3;
  // Threads each rank computes on, when the compute is measured here: 0 = as a launch runs them
  // (the recipe's launch.threads_per_rank, else this node's cores shared among its ranks).
  int threads_per_rank = 0;
};

// The resolved inputs, and how each was obtained (printed above the table).
struct PredictInputs {
  predict::PredictRequest request;
  std::string model_name;
  std::string compute_note, comm_note, overlap_note;
  // Where a measured interference went (--interference measure: stored, or why not), or which
  // database's stored ones could not be read; "" otherwise.
  std::string interference_stored;
  std::optional<recipes::Recipe> recipe;
};

// Parses "1,8,64" (each 1 .. 1,000,000). Errors: invalid_input naming --nodes.
Result<std::vector<int>> parse_node_list(const std::string& text);
// Parses "GBPS[,US]" into a link (latency default_us when not given). Errors: invalid_input
// naming `flag`.
Result<predict::Link> parse_link(const std::string& text, const std::string& flag,
                                 double default_us, double efficiency);

// How a plan's ranks compute, beyond the threads: its precision ("" the recipe's) and the
// kernels it chose per node (empty: the engine's defaults).
struct RankCompute {
  std::string precision;
  std::map<std::string, std::string> kernels;
};

// One rank's compute measured here: dltune-worker profile of `target` (a recipe when
// `is_recipe`, else a built-in model) at `batch`, `steps` timed steps, on `threads` threads (the
// rank's: a launch's ranks train on their binding's cores), as `how` says; with `copies` > 1,
// that many copies at once, each on its share of the cores, the slowest reported (profile
// --copies: ranks of a node slow each other through what they share). Errors: the run failing
// (exit 2 when it found bad input, else 1).
Result<predict::ComputeProfile> profile_here(const std::string& target, bool is_recipe, int batch,
                                             int steps, const predict::ModelCosts& model,
                                             int threads = 1, const RankCompute& how = {},
                                             int copies = 1);

// Runs a measuring program (`argv`, dltune-worker's profile or overlap) to completion and
// reads the JSON it wrote to `out`; `what` names it in errors ("measuring the compute
// (dltune-worker profile)"). Errors: its exit code (invalid_input where it was 2, else
// peer_failed), an unreadable `out`, no JSON object there (internal).
Result<nlohmann::json> run_for_json(const std::vector<std::string>& argv, const std::string& out,
                                    const std::string& what);

// The profile copies for `ranks_sharing` ranks of `threads` threads on a machine of `cores`
// cores (0: unknown): as many as fit its cores without sharing one (predict's own model counts
// the slowdown of ranks that share cores), at least 1, at most 64.
int profile_copies(int ranks_sharing, int threads, int cores);

// Resolves everything; measuring this machine's compute runs dltune-worker profile (seconds).
// Errors: bad options and files (invalid_input / not_found, exit 2), a profile run that fails
// (exit 1), no communication model for a shape asked (unsupported, exit 2, saying what to
// run or give).
Result<PredictInputs> resolve_predict_inputs(const PredictOptions& o);

}  // namespace dltune::launcher
