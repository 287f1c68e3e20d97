#include "launcher/flow/predict_inputs.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "common/strings.h"
#include "launcher/backend/rank_program.h"
#include "launcher/backend/temp_dir.h"
#include "launcher/flow/cost_fits.h"
#include "launcher/flow/launch_job.h"
#include "launcher/flow/predict_interference.h"
#include "launcher/flow/text_format.h"
#include "planning/buckets.h"
#include "planning/model_costs.h"
#include "recipes/model/builtins.h"
#include "recipes/yaml_reader.h"
#include "topology/topology.h"
#include "tuner/db/key.h"
#include "tuner/db/lookup.h"
#include "tuner/db/store.h"

#include "predict/devices.h"
#include "predict/machine_comm.h"
#include "predict/topo_fabric.h"

namespace dltune::launcher {
namespace {

namespace tdb = tuner::db;
using predict::Link;

using text::fixed;

// This machine's topology for the inputs that need it (the cores a profile runs on, the
// fingerprint of its stored measurements, the interference key): discovered once, on first use.
class HereTopology {
 public:
  const Result<topology::Topology>& get() {
    if (!topo_) topo_.emplace(topology::discover_default());
    return *topo_;
  }

 private:
  std::optional<Result<topology::Topology>> topo_;
};

std::string link_text(const Link& l) {
  return fixed(l.gbps(), l.gbps() < 10 ? 2 : 0) + " GB/s, " + fixed(l.alpha_s * 1e6, 1) + " us";
}

// The graph the target names, its name, and the recipe when it is one.
Result<std::pair<recipes::Graph, std::optional<recipes::Recipe>>> resolve_target(
    const std::string& t) {
  if (recipes::builtin_info(t)) {
    return std::make_pair(*recipes::builtin_graph(t, {}), std::optional<recipes::Recipe>());
  }
  auto r = recipes::load_recipe(t);
  if (!r) {
    if (r.error().kind() == ErrorKind::kNotFound) {
      return not_found("'" + t + "' is neither a built-in model (" +
                       strings::join(recipes::builtin_model_names(), ", ") + ") nor a recipe" +
                       recipes::did_you_mean(t, recipes::builtin_model_names()));
    }
    return r.error();
  }
  recipes::Graph g = r->model.graph;
  return std::make_pair(std::move(g), std::optional<recipes::Recipe>(std::move(*r)));
}

int recipe_batch(const recipes::Recipe& r) {
  const auto& t = r.training;
  if (t.per_rank_batch > 0) return static_cast<int>(t.per_rank_batch);
  const int64_t ranks = std::max<int64_t>(1, r.launch.ranks);
  if (t.global_batch > 0) return static_cast<int>(std::max<int64_t>(1, t.global_batch / ranks));
  return 32;
}

// This machine's measurements and stored cost models from the user and site databases.
void machine_rows(const PredictOptions& o, const std::string& fingerprint,
                  std::vector<tdb::Measurement>* rows, std::vector<predict::LevelFit>* fits,
                  std::string* where) {
  auto layers =
      tdb::layers_from_env(o.db.empty() ? std::nullopt : std::optional<std::string>(o.db));
  if (!layers) return;
  std::vector<std::string> dbs = {layers->user_db};
  dbs.insert(dbs.end(), layers->site_dbs.begin(), layers->site_dbs.end());
  tdb::Filter f;
  f.fingerprint = fingerprint;
  for (const std::string& path : dbs) {
    if (path.empty() || !paths::exists(path)) continue;
    auto db = tdb::TuningDb::open(path, tdb::OpenMode::kReadOnly);
    if (!db) continue;
    if (auto ms = db->measurements(f)) {
      if (!ms->empty() && where->empty()) *where = path;
      rows->insert(rows->end(), ms->begin(), ms->end());
    }
    if (auto cms = db->cost_models(f)) {
      for (const tdb::CostModel& c : *cms) fits->push_back(level_fit_of(c));
    }
  }
}

struct CommChoice {
  predict::CommSource source;
  bool intra = false, inter = false;  // known
};

Result<CommChoice> comm_source(const PredictOptions& o, const std::optional<predict::Device>& dev,
                               const std::optional<predict::NodeTopology>& topo, bool devices,
                               int per_node, HereTopology& here, std::string* note) {
  CommChoice c;
  predict::CommSource& s = c.source;
  std::vector<std::string> said;
  if (topo) {
    s.fabric = predict::fabric_from_topology(*topo, predict::kNetworkEfficiency);
    c.intra = true;
    c.inter = topo->nic_gbit > 0;
    said.push_back("--topo (" + topo->format + "): GPUs over " + topo->gpu_link + ", " +
                   (topo->nics > 0 ? topo->nic : std::string("no NIC")));
  } else if (dev) {
    s.fabric.intra = {1e-6, 1 / (dev->nvlink_gbps * 1e9), 0};
    c.intra = true;
    said.push_back("intra: " + dev->name + " NVLink " + fixed(dev->nvlink_gbps, 0) +
                   " GB/s a direction (datasheet)");
  } else if (!devices) {
    const auto& topology = here.get();
    if (topology) {
      const std::string fp =
          tuner::db::make_key(*topology, tdb::JobShape{1, 1}, "", false).fingerprint;
      std::vector<tdb::Measurement> rows;
      std::vector<predict::LevelFit> fits;
      std::string where;
      machine_rows(o, fp, &rows, &fits, &where);
      predict::MachineComm mc = predict::machine_comm(rows, fits, per_node);
      s = mc.source;
      c.intra = mc.has_intra;
      c.inter = mc.has_inter;
      std::string shapes;
      for (const auto& [shape, curves] : s.measured) {
        shapes += (shapes.empty() ? "" : ", ") + std::to_string(shape.first) + "x" +
                  std::to_string(shape.second);
      }
      if (!shapes.empty()) said.push_back("measured sweeps (" + shapes + ") in " + where);
      if (mc.intra_free) {
        said.push_back("no one-node sweep: the inter-node fit carries the node-local part");
      }
      for (const predict::LevelFit& f : mc.fits) {
        said.push_back(f.level + " fit at " + std::to_string(f.nodes) + "x" +
                       std::to_string(f.ranks_per_node) + ": " + link_text(f.link) + ", " +
                       fixed(f.link.gamma_s_per_b > 0 ? 1e-9 / f.link.gamma_s_per_b : 0, 1) +
                       " GB/s reduce, error " + fixed(100 * f.rel_rms, 0) + " %");
      }
    }
  }
  if (topo || dev) {  // links from specifications: the model's checked error
    s.model_spread = predict::kSpecifiedFabricError;
    s.model_spread_basis = "the model's error against published nccl-tests";
  }
  if (!o.intra.empty()) {
    auto l = parse_link(o.intra, "--intra", 1, 1.0);
    if (!l) return l.error();
    s.fabric.intra = *l;
    c.intra = true;
    said.push_back("intra (--intra): " + link_text(*l));
  }
  if (!o.inter.empty()) {
    auto l = parse_link(o.inter, "--inter", 5, predict::kNetworkEfficiency);
    if (!l) return l.error();
    s.fabric.inter = *l;
    c.inter = true;
    said.push_back("inter (--inter, x" + fixed(predict::kNetworkEfficiency, 2) +
                   " of line rate): " + link_text(*l) + " per rank");
  }
  if (devices) s.algorithms = predict::nccl_algorithms();
  if (o.algo != "auto") {
    auto a = predict::parse_algo(o.algo);
    if (!a) return std::move(a).error().wrap("--algo");
    s.forced = *a;
  }
  *note = strings::join(said, "; ");
  return c;
}

}  // namespace

Result<predict::ComputeProfile> profile_here(const std::string& target, bool is_recipe, int batch,
                                             int steps, const predict::ModelCosts& model,
                                             int threads, const RankCompute& how, int copies) {
  auto worker = cli::sibling_program("dltune-worker");
  if (!worker) return worker.error();
  auto dir = TempDir::create_in_tmp("dltune-predict-");
  if (!dir) return dir.error();
  const std::string out = dir->path() + "/profile.json";
  std::vector<std::string> argv = {*worker,
                                   "profile",
                                   is_recipe ? "--recipe" : "--model",
                                   target,
                                   "--batch",
                                   std::to_string(batch),
                                   "--steps",
                                   std::to_string(steps),
                                   "--threads",
                                   std::to_string(std::max(1, threads)),
                                   "--out",
                                   out};
  if (!how.precision.empty()) argv.insert(argv.end(), {"--precision", how.precision});
  if (copies > 1) argv.insert(argv.end(), {"--copies", std::to_string(copies)});
  if (!how.kernels.empty()) {
    const std::string file = dir->path() + "/kernels.json";
    DLTUNE_TRY(paths::write_file_atomic(file, nlohmann::json(how.kernels).dump()));
    argv.insert(argv.end(), {"--kernel-choices", file});
  }
  auto j = run_for_json(argv, out, "measuring the compute (dltune-worker profile)");
  if (!j) return j.error();
  return predict::profile_from_json(
      *j, model,
      "measured here by dltune-worker profile (" + std::to_string(steps) + " steps, " +
          std::to_string(std::max(1, threads)) + " thread" + (threads > 1 ? "s" : "") +
          (how.kernels.empty() ? "" : ", the plan's kernels") +
          (copies > 1 ? ", the slowest of " + std::to_string(copies) +
                            " copies at once, as a node's ranks run"
                      : "") +
          ")");
}

Result<nlohmann::json> run_for_json(const std::vector<std::string>& argv, const std::string& out,
                                    const std::string& what) {
  auto rc = cli::run_to_completion(argv, "predict");
  if (!rc) return rc.error();
  if (*rc != 0) {
    const std::string why = what + " exited " + std::to_string(*rc);
    return *rc == 2 ? invalid_input(why) : peer_failed(why);
  }
  auto text = paths::read_file(out);
  if (!text) return text.error();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return internal_error(what + " wrote no JSON to " + out);
  return j;
}

int profile_copies(int ranks_sharing, int threads, int cores) {
  const int fit = cores > 0 ? std::max(1, cores / std::max(1, threads)) : 1;
  return std::clamp(std::min(ranks_sharing, fit), 1, 64);
}

Result<std::vector<int>> parse_node_list(const std::string& text) {
  std::vector<int> out;
  for (const std::string& part : strings::split(text, ',')) {
    auto v = strings::parse_int(std::string(strings::trim(part)));
    if (!v || *v < 1 || *v > 1000000) {
      return invalid_input("--nodes: expected node counts of at least 1 such as 1,8,64, got '" +
                           text + "'");
    }
    out.push_back(static_cast<int>(*v));
  }
  if (out.empty()) return invalid_input("--nodes: give at least one node count");
  return out;
}

Result<Link> parse_link(const std::string& text, const std::string& flag, double default_us,
                        double efficiency) {
  const auto parts = strings::split(text, ',');
  auto bad = [&] {
    return invalid_input(flag +
                         ": expected GBPS[,US] (GB/s per rank, latency in us) such as 25 or "
                         "25,5, got '" +
                         text + "'");
  };
  if (parts.empty() || parts.size() > 2) return bad();
  char* end = nullptr;
  const double gbps = std::strtod(parts[0].c_str(), &end);
  if (end == parts[0].c_str() || *end != '\0' || !(gbps > 0) || gbps > 1e5) return bad();
  double us = default_us;
  if (parts.size() == 2) {
    us = std::strtod(parts[1].c_str(), &end);
    if (end == parts[1].c_str() || *end != '\0' || !(us >= 0) || us > 1e6) return bad();
  }
  return Link{us * 1e-6, 1 / (gbps * efficiency * 1e9), 0};
}

namespace {

// The hardware the options describe instead of this machine: --device, --topo.
struct Described {
  std::optional<predict::Device> dev;
  std::optional<predict::NodeTopology> topo;
};

// The described hardware, read. Errors: an unknown device, an unreadable topology.
Result<Described> described_hardware(const PredictOptions& o) {
  Described d;
  if (!o.device.empty()) {
    auto dev = predict::find_device(o.device);
    if (!dev) return dev.error();
    d.dev = *dev;
  }
  if (!o.topo.empty()) {
    auto t = predict::load_node_topology(o.topo);
    if (!t) return t.error();
    d.topo = *t;
  }
  return d;
}

// One device's compute at `batch` into in.request.compute and in.compute_note: from
// --single-sps, else the described device's rate, else profiled on this machine (whose core
// count then goes to *cores; 0 otherwise). `opt_s`: the optimizer's seconds per step.
Status resolve_compute(const PredictOptions& o, const std::optional<predict::Device>& dev,
                       int batch, double opt_s, HereTopology& here, PredictInputs& in, int* cores) {
  predict::PredictRequest& r = in.request;
  *cores = 0;
  if (o.single_sps > 0) {
    r.compute = predict::profile_from_throughput(r.model, batch, o.single_sps, opt_s,
                                                 "one device's " + fixed(o.single_sps, 1) +
                                                     " samples/s at batch " +
                                                     std::to_string(batch) + " (--single-sps)");
  } else if (dev) {
    r.compute = predict::profile_from_rate(
        r.model, batch, dev->effective_flops(r.model.transformer), opt_s,
        "device " + dev->name + " (" + dev->description + ": " + fixed(dev->peak_tflops, 1) +
            " TFLOP/s x " + fixed(dev->fraction(r.model.transformer), 2) +
            (r.model.transformer ? " for transformers" : " for CNNs") + ", an assumed fraction; " +
            dev->source + ")");
  } else {
    if (const auto& t = here.get()) *cores = static_cast<int>(t->cores.size());
    // As a launch runs the ranks (a built-in model: as a recipe that leaves them auto).
    const int threads = o.threads_per_rank > 0
                            ? o.threads_per_rank
                            : threads_per_rank(in.recipe.value_or(recipes::Recipe{}),
                                               std::max(1, r.per_node), *cores)
                                  .first;
    auto c = profile_here(o.target, in.recipe.has_value(), batch, o.profile_steps, r.model, threads,
                          {}, profile_copies(r.per_node, threads, *cores));
    if (!c) return c.error();
    r.compute = *c;
    r.threads_per_rank = threads;
  }
  r.cores_per_node = *cores;
  in.compute_note = r.compute.source + ": one device " +
                    fixed(predict::single_device_sps(r.compute), 1) + " samples/s";
  return {};
}

// Ranks per node: --per-node, else the topology's GPUs, a device's 8, the recipe's; at least 1.
int ranks_per_node(const PredictOptions& o, const Described& hw,
                   const std::optional<recipes::Recipe>& recipe) {
  int per_node = o.per_node;
  if (per_node == 0 && hw.topo) per_node = hw.topo->gpus;
  if (per_node == 0 && hw.dev) per_node = 8;
  if (per_node == 0 && recipe) {
    const auto& l = recipe->launch;
    per_node =
        static_cast<int>(l.ranks_per_node > 0 ? l.ranks_per_node : std::max<int64_t>(1, l.ranks));
  }
  return std::max(1, per_node);
}

// Error (unsupported, saying what to measure or give) where a node count that no sweep
// measured needs a link model `comm` lacks: inside a node, or between nodes.
Status check_link_models(const predict::PredictRequest& r, const CommChoice& comm) {
  for (int n : r.nodes) {
    const bool measured = r.comm.measured.count({n, r.per_node}) > 0;
    if (measured) continue;
    if (r.per_node > 1 && !comm.intra) {
      return unsupported(
          "no model of this machine's links inside a node: run `dltune tune "
          "--collectives -n " +
          std::to_string(r.per_node) +
          "` (or a launch) first, or give --intra GBPS[,US], --device or --topo");
    }
    if (n > 1 && !comm.inter) {
      return unsupported(
          "no model of the network between nodes: give --inter GBPS[,US] or --topo "
          "FILE, or measure one (a launch or `dltune tune --collectives` across "
          "nodes, tests/slurm/netns_cluster.sh)");
    }
  }
  return {};
}

// The buckets (--bucket, else the recipe's, else 4 MiB) and overlap into in.request, with
// in.overlap_note (naming the `cores` per node where known). Error: a bad --bucket.
Status resolve_buckets(const PredictOptions& o, int cores, PredictInputs& in) {
  predict::PredictRequest& r = in.request;
  uint64_t bucket = 4 << 20;
  if (in.recipe && in.recipe->comm.bucket_bytes > 0) bucket = in.recipe->comm.bucket_bytes;
  if (!o.bucket.empty()) {
    auto b = strings::parse_bytes(o.bucket);
    if (!b || *b < 4)
      return invalid_input("--bucket: expected a byte count such as 4MiB, got '" + o.bucket + "'");
    bucket = *b;
  }
  r.bucket_bytes = bucket;
  r.overlap = !o.no_overlap && !(in.recipe && in.recipe->comm.overlap == recipes::Overlap::kOff);
  in.overlap_note = std::string(r.overlap ? "buckets reduced during backward" : "no overlap") +
                    ", " + strings::format_bytes(bucket) + " buckets in the engine's order (" +
                    std::to_string(planning::gradient_buckets(r.model.info, bucket).size()) + ")";
  if (cores > 0)
    in.overlap_note += "; " + std::to_string(cores) + " cores per node shared by its ranks";
  return {};
}

// --interference into in.request.interference: measured here (and stored in the user's
// database, in.interference_stored saying so or why not), given, or, without the option, this
// machine's stored measurement of the same model and shape where there is one; left empty
// otherwise (assumed by kind). Errors: bad text; `measure` where the compute is a device's, as
// measure_interference().
Status resolve_interference(const PredictOptions& o, bool devices, int batch,
                            const recipes::Graph& graph, HereTopology& here, PredictInputs& in) {
  predict::PredictRequest& r = in.request;
  if (o.interference == "assumed") return {};
  if (!o.interference.empty() && o.interference != "measure") {
    auto i = parse_interference(o.interference);
    if (!i) return i.error();
    r.interference = std::move(*i);
    return {};
  }
  if (devices) {
    if (o.interference.empty()) return {};
    return invalid_input(
        "--interference measure: the compute is a device's (--device, --single-sps, --topo), "
        "not this machine's; give the slowdowns as C[,M] instead");
  }
  auto layers =
      tdb::layers_from_env(o.db.empty() ? std::nullopt : std::optional<std::string>(o.db));
  const auto& topology = here.get();
  if (o.interference.empty()) {
    if (!layers || !topology) return {};
    const auto rows = stored_interference(*layers, interference_key(*topology, graph, r.per_node),
                                          &in.interference_stored);
    if (auto i = pick_interference(rows, r.threads_per_rank, batch)) r.interference = std::move(*i);
    return {};
  }
  auto i = measure_interference(o.target, in.recipe.has_value(), batch, r.per_node,
                                r.threads_per_rank, r.bucket_bytes);
  if (!i) return i.error();
  r.interference = std::move(*i);
  // Kept for later predictions; a database that cannot take it costs the measurement, not this
  // prediction.
  auto store = [&]() -> Status {
    if (!layers) return layers.error();
    if (!topology) return topology.error();
    // Measured here: another machine's key (DLTUNE_TOPO_XML) must not hold it.
    if (topology->source != "live") {
      return invalid_input(
          "the topology is another machine's (DLTUNE_TOPO_XML), and this "
          "measurement is this machine's");
    }
    if (layers->user_db.empty()) return invalid_input("no user database");
    auto db = tdb::TuningDb::open(layers->user_db, tdb::OpenMode::kReadWrite);
    if (!db) return db.error();
    return db->put_interference(interference_record(
        r.interference, interference_key(*topology, graph, r.per_node), r.threads_per_rank, batch));
  };
  const Status stored = store();
  if (stored.ok()) {
    in.interference_stored = "stored in " + layers->user_db +
                             " for later predictions of this model, ranks per node and threads";
  }
  if (!stored.ok()) in.interference_stored = "not stored: " + stored.error().message();
  return {};
}

}  // namespace

Result<PredictInputs> resolve_predict_inputs(const PredictOptions& o) {
  PredictInputs in;
  predict::PredictRequest& r = in.request;
  auto target = resolve_target(o.target);
  if (!target) return target.error();
  in.recipe = std::move(target->second);
  in.model_name = in.recipe ? in.recipe->name : o.target;
  auto costs = planning::model_costs(target->first, in.model_name);
  if (!costs) return costs.error();
  r.model = std::move(*costs);
  if (o.nodes.empty()) return invalid_input("--nodes: give at least one node count");
  r.nodes = o.nodes;
  auto parallel = predict::parse_parallel(o.parallel);
  if (!parallel) return parallel.error();
  r.parallel = *parallel;
  if (o.batch < 0 || o.per_node < 0)
    return invalid_input("--batch and --per-node must be at least 1");
  if (o.single_sps < 0) return invalid_input("--single-sps must be a positive samples/s");
  const int batch = o.batch > 0 ? o.batch : in.recipe ? recipe_batch(*in.recipe) : 32;

  auto hw = described_hardware(o);
  if (!hw) return hw.error();
  const bool devices = hw->dev || hw->topo || o.single_sps > 0;
  const std::string optimizer = in.recipe ? in.recipe->training.optimizer.kind : "sgd";
  const double opt_s =
      hw->dev ? predict::optimizer_seconds(r.model.parameters, hw->dev->memory_gbps, optimizer) : 0;
  int cores = 0;
  r.per_node = ranks_per_node(o, *hw, in.recipe);
  HereTopology here;  // discovered once, by the first of these that needs it
  DLTUNE_TRY(resolve_compute(o, hw->dev, batch, opt_s, here, in, &cores));
  auto comm = comm_source(o, hw->dev, hw->topo, devices, r.per_node, here, &in.comm_note);
  if (!comm) return comm.error();
  r.comm = comm->source;
  DLTUNE_TRY(check_link_models(r, *comm));
  DLTUNE_TRY(resolve_buckets(o, cores, in));
  DLTUNE_TRY(resolve_interference(o, devices, batch, target->first, here, in));
  return in;
}

}  // namespace dltune::launcher
