#include "launcher/launch_job.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "common/env.h"
#include "common/paths.h"
#include "common/stats.h"
#include "common/strings.h"
#include "engine/train/recipe_config.h"
#include "launcher/launch_outcome.h"
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
  auto recipe = recipes::load_recipe_with_overrides(o.recipe, o.overrides);
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
                 int* exit_code, const std::string& plan_file) {
  // Each launch runs in a `dltune run` child: libpmix's server cannot be started twice in one
  // process, and a launch does several (collective sweep, trials, training).
  auto self = cli::sibling_program("dltune");  // this binary
  if (!self) return self.error();
  std::vector<std::string> cmd = launch_prefix(job, plan_file);
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

std::vector<std::string> launch_prefix(const Job& job, const std::string& plan_file) {
  std::vector<std::string> p = {"dltune", "run", "-n", std::to_string(job.ranks)};
  if (job.backend == Backend::kSlurm) {
    p.insert(p.end(), {"--nodes", std::to_string(job.shape.nodes), "--backend", "slurm"});
  } else {
    p.insert(p.end(), {"--backend", "local"});
  }
  p.insert(p.end(), {"--bind", job.recipe.launch.binding});
  if (!plan_file.empty()) p.insert(p.end(), {"--plan", plan_file});
  p.push_back("--");
  return p;
}

namespace {

// The timed steps' times (every step but the first) in a metrics file written with log_every 1.
std::vector<double> step_times(const std::string& metrics) {
  std::vector<double> out;
  auto text = paths::read_file(metrics);
  if (!text) return out;
  for (const std::string& line : strings::split(*text, '\n')) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || j.value("event", "") != "step" || j.value("step", int64_t{0}) < 2) {
      continue;
    }
    out.push_back(j.value("step_s", 0.0));
  }
  return out;
}

}  // namespace

Job baseline_job(const Job& job) {
  Job one = job;
  one.ranks = 1;
  one.shape.nodes = 1;  // was the job's: "1 ranks do not divide evenly over 2 nodes"
  one.shape.ranks_per_node = 1;
  return one;
}

Result<Baseline> measure_baseline(const Job& job, const std::string& worker,
                                  const engine::TrainConfig& cfg, double step_s, const RunDir& dir,
                                  Progress* progress) {
  const Job one = baseline_job(job);
  engine::TrainConfig c = cfg;
  c.scaling = engine::Scaling::kWeak;
  c.per_rank_batch = cfg.per_rank_batch;
  // A pipeline's baseline is one rank training a replica's batch whole (its micro-batches kept,
  // which bound its activations as the stages' did).
  c.stages = 1;
  c.partition.clear();
  c.recompute = false;
  c.heldout_size = 0;
  c.eval_every = 0;
  c.log_every = 1;
  // Step time does not depend on the learning rate, but a rate scaled for the job's global
  // batch can make one rank's loss NaN, which ends a training run. 1e-12 keeps every update
  // a normal float (no denormal slow path) while the weights stay put.
  c.lr = 1e-12;
  c.min_lr = 0;
  c.checkpoint_path.clear();
  c.trace_path.clear();
  c.metrics_path = dir.file("baseline_metrics.jsonl");
  const std::string cfg_path = dir.file("baseline_config.json");
  const std::string out = dir.file("baseline_summary.json");
  const double guess_s = step_s > 0 ? step_s : 0.05;
  int64_t steps = std::max<int64_t>(kBaselineMinSteps,
                                    static_cast<int64_t>(std::ceil(kBaselineFirstS / guess_s)));
  Baseline b;
  b.bind = job.recipe.launch.binding;
  for (;;) {
    c.steps = steps;
    std::remove(c.metrics_path.c_str());  // the metrics writer appends
    DLTUNE_TRY_CTX(paths::write_file_atomic(cfg_path, engine::to_json(c)), "writing " + cfg_path);
    {
      MetricsFollower follow(c.metrics_path, static_cast<long>(steps), progress);
      DLTUNE_TRY(run_ranks(one, "the 1-rank baseline",
                           {worker, "train", "--plan", cfg_path, "--summary", out}));
    }
    auto text = paths::read_file(out);
    if (!text) return text.error();
    auto j = nlohmann::json::parse(*text, nullptr, false);
    const double sps = j.is_object() ? j.value("throughput_sps", 0.0) : 0.0;
    if (!(sps > 0)) return internal_error(out + " holds no throughput");
    const std::vector<double> times = step_times(c.metrics_path);
    b.sps = sps;
    b.steps = steps;
    b.rel_ci = stats::mean_rel_ci_batched(times);
    const double run_s = static_cast<double>(steps) * c.per_rank_batch / sps;
    if (b.rel_ci <= kBaselineRelCi || 4 * run_s > kBaselineMaxS) break;
    steps *= 4;
  }
  return b;
}

}  // namespace dltune::launcher
