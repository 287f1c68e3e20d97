#include "launcher/launch_job.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "common/env.h"
#include "common/paths.h"
#include "common/strings.h"
#include "engine/recipe_config.h"
#include "launcher/launch_spec.h"
#include "launcher/rank_program.h"
#include "launcher/slurm_backend.h"

namespace dltune::launcher {
namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return 0;
  auto n = strings::parse_int(v);
  return n && *n > 0 && *n < (1 << 20) ? static_cast<int>(*n) : 0;
}

}  // namespace

Result<Job> make_job(const JobOptions& o, const topology::Topology& topo) {
  Job job;
  auto recipe = recipes::load_recipe(o.recipe);
  if (!recipe) return std::move(recipe).error();
  job.recipe = std::move(*recipe);
  job.recipe_path = job.recipe.source_path;
  auto backend = o.backend.empty() ? default_backend() : parse_backend(o.backend);
  if (!backend) return std::move(backend).error().wrap("--backend");
  job.backend = *backend;
  const bool slurm = job.backend == Backend::kSlurm;
  int nodes = o.nodes > 0 ? o.nodes : (slurm ? std::max(env_int("SLURM_JOB_NUM_NODES"), 1) : 1);
  if (!slurm && nodes > 1) {
    return invalid_input("--nodes " + std::to_string(nodes) +
                         " needs the slurm backend (run inside an allocation or pass "
                         "--backend slurm)");
  }
  int ranks = o.ranks > 0 ? o.ranks : static_cast<int>(job.recipe.launch.ranks);
  if (ranks <= 0 && slurm) ranks = env_int("SLURM_NTASKS");
  if (ranks <= 0 && job.recipe.launch.ranks_per_node > 0) {
    ranks = nodes * static_cast<int>(job.recipe.launch.ranks_per_node);
  }
  if (ranks <= 0) {  // one per GPU, else one per NUMA domain
    const int per_node = !topo.gpus.empty()
                             ? static_cast<int>(topo.gpus.size())
                             : std::max<int>(1, static_cast<int>(topo.numa_nodes.size()));
    ranks = nodes * per_node;
  }
  if (slurm && in_slurm_allocation() && allocation_nodes() > 0 && nodes > allocation_nodes()) {
    return invalid_input("--nodes " + std::to_string(nodes) + ": this allocation has " +
                         std::to_string(allocation_nodes()) + " node(s); ask salloc/sbatch for " +
                         std::to_string(nodes) + " or lower --nodes");
  }
  if (ranks % nodes != 0) {
    return invalid_input(std::to_string(ranks) + " ranks do not divide evenly over " +
                         std::to_string(nodes) + " nodes; choose -n as a multiple of --nodes");
  }
  job.ranks = ranks;
  job.shape = recipes::JobShape{nodes, ranks / nodes};
  job.recipe.launch.ranks = ranks;
  job.recipe.launch.ranks_per_node = ranks / nodes;
  auto problems = recipes::validate_recipe(job.recipe);
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) {
      all +=
          (all.empty() ? "" : "\n") + p.to_string() + " (with " + std::to_string(ranks) + " ranks)";
    }
    return invalid_input(all);
  }
  auto bind = topology::parse_bind_policy(job.recipe.launch.binding);
  if (!bind) return std::move(bind).error().wrap("launch.binding");
  job.bind = *bind;
  return job;
}

Status run_ranks(const Job& job, const std::string& phase, const std::vector<std::string>& argv,
                 int* exit_code) {
  // Each launch runs in a `dltune run` child: libpmix's server cannot be started twice in one
  // process, and a launch does several (collective sweep, trials, training).
  auto self = cli::sibling_program("dltune");  // this binary
  if (!self) return self.error();
  std::vector<std::string> cmd = launch_prefix(job);
  cmd[0] = *self;
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  auto rc = cli::run_to_completion(cmd, "launch");
  if (!rc) return std::move(rc).error().wrap(phase);
  if (exit_code != nullptr) *exit_code = *rc;
  if (*rc == 0) return ok_status();
  if (*rc == 130 || *rc == 143) {
    return Error{ErrorKind::kInternal,
                 phase + " was interrupted (" + (*rc == 130 ? "SIGINT" : "SIGTERM") + ")"};
  }
  return peer_failed(phase + " failed (the launcher's message is above; exit code " +
                     std::to_string(*rc) + ")");
}

std::string quote_argv(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    const bool plain = a.find_first_of(" \t'\"$`\\") == std::string::npos && !a.empty();
    s += (s.empty() ? "" : " ") + (plain ? a : "'" + a + "'");
  }
  return s;
}

std::vector<std::string> launch_prefix(const Job& job) {
  std::vector<std::string> p = {"dltune", "run", "-n", std::to_string(job.ranks)};
  if (job.backend == Backend::kSlurm) {
    p.insert(p.end(), {"--nodes", std::to_string(job.shape.nodes), "--backend", "slurm"});
  } else {
    p.insert(p.end(), {"--backend", "local"});
  }
  p.insert(p.end(), {"--bind", job.recipe.launch.binding, "--"});
  return p;
}

Result<double> measure_baseline(const std::string& worker, const engine::TrainConfig& cfg,
                                const RunDir& dir) {
  engine::TrainConfig one = cfg;
  one.scaling = engine::Scaling::kWeak;
  one.per_rank_batch = cfg.per_rank_batch;
  one.steps = std::min<int64_t>(cfg.steps, 30);
  one.heldout_size = 0;
  one.eval_every = 0;
  // Step time does not depend on the learning rate, but a rate scaled for the job's global
  // batch can make one rank's loss NaN, which ends a training run. 1e-12 keeps every update
  // a normal float (no denormal slow path) while the weights stay put.
  one.lr = 1e-12;
  one.min_lr = 0;
  one.metrics_path.clear();
  one.checkpoint_path.clear();
  one.trace_path.clear();
  const std::string cfg_path = dir.file("baseline_config.json");
  const std::string out = dir.file("baseline_summary.json");
  DLTUNE_TRY_CTX(paths::write_file_atomic(cfg_path, engine::to_json(one)), "writing " + cfg_path);
  auto rc =
      cli::run_to_completion({worker, "train", "--plan", cfg_path, "--summary", out}, "launch");
  if (!rc) return rc.error();
  if (*rc != 0) return peer_failed("the 1-rank run exited with code " + std::to_string(*rc));
  auto text = paths::read_file(out);
  if (!text) return text.error();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  const double sps = j.is_object() ? j.value("throughput_sps", 0.0) : 0.0;
  if (!(sps > 0)) return internal_error(out + " holds no throughput");
  return sps;
}

}  // namespace dltune::launcher
