#include "launcher/flow/launch_job.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/env.h"
#include "common/paths.h"
#include "common/stats.h"
#include "common/strings.h"
#include "engine/core/cpu_features.h"
#include "launcher/backend/launch_spec.h"
#include "launcher/backend/rank_program.h"
#include "launcher/backend/slurm_backend.h"
#include "launcher/backend/ssh_backend.h"
#include "launcher/backend/temp_dir.h"
#include "launcher/flow/launch_progress.h"
#include "recipes/recipe_overrides.h"

namespace dltune::launcher {
namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return 0;
  auto n = strings::parse_int(v);
  return n && *n > 0 && *n < (1 << 20) ? static_cast<int>(*n) : 0;
}

// Ranks per node when neither -n nor the recipe says: one per GPU; else, with
// launch.threads_per_rank N, as many N-thread ranks as the node's cores hold; else one per NUMA
// domain (each computing on its domain's cores, the threads below).
int auto_ranks_per_node(const recipes::Recipe& r, const topology::Topology& topo, int cores) {
  if (!topo.gpus.empty()) return static_cast<int>(topo.gpus.size());
  if (r.launch.threads_per_rank > 0)
    return std::max(1, cores / static_cast<int>(r.launch.threads_per_rank));
  return std::max<int>(1, static_cast<int>(topo.numa_nodes.size()));
}

// --nodes MIN-MAX (o.nodes, o.nodes_max) for make_job(): `*nodes` as many as the allocation's
// `usable` nodes (besides the lost and spare ones) up to MAX, MIN outside an allocation (the
// launch asks salloc for the range and runs again inside it); launch.ranks left aside (the ranks
// follow the nodes), launch.min_nodes set to MIN, job->nodes_max, and notes saying so. Errors
// (invalid_input): not the slurm backend, -n given, fewer usable nodes than MIN.
Status take_node_range(const JobOptions& o, bool slurm, int usable, bool lost, bool spares,
                       Job* job, int* nodes) {
  const std::string nm = std::to_string(o.nodes) + "-" + std::to_string(o.nodes_max);
  if (!slurm) {
    return invalid_input("--nodes " + nm +
                         " needs the slurm backend (run inside an allocation or pass "
                         "--backend slurm)");
  }
  if (o.ranks > 0) {
    return invalid_input("-n " + std::to_string(o.ranks) + " with --nodes " + nm +
                         ": the job's ranks follow its nodes (launch.ranks_per_node on each); "
                         "leave -n out");
  }
  recipes::LaunchConfig& launch = job->recipe.launch;
  if (launch.ranks > 0) {
    job->notes.push_back("launch.ranks " + std::to_string(launch.ranks) +
                         " left aside: with --nodes " + nm +
                         " the ranks follow the nodes the job gets");
    launch.ranks = 0;
  }
  const bool inside = in_slurm_allocation() && allocation_nodes() > 0;
  if (inside) {
    *nodes = std::min(o.nodes_max, usable);
    if (*nodes < o.nodes) {
      return invalid_input("--nodes " + nm + ": this allocation has " + std::to_string(usable) +
                           " node(s)" + (lost ? " besides the lost ones" : "") +
                           (spares ? " and the spare ones" : "") + ", fewer than " +
                           std::to_string(o.nodes));
    }
  }
  if (launch.min_nodes != o.nodes) {
    if (launch.min_nodes > 0) {
      job->notes.push_back("launch.min_nodes " + std::to_string(launch.min_nodes) +
                           " replaced by " + std::to_string(o.nodes) + ", --nodes " + nm +
                           "'s least");
    }
    launch.min_nodes = o.nodes;
  }
  job->nodes_max = o.nodes_max;
  job->notes.push_back(
      "--nodes " + nm + ": " +
      (inside
           ? std::to_string(*nodes) + " node(s) of this allocation"
           : "planned here for " + std::to_string(*nodes) +
                 " node(s); the launch asks salloc for " + nm + " and runs on as many as it gets") +
      "; a lost node's place is taken by a spare or a node the allocation grows by, else the "
      "job goes on on fewer down to " +
      std::to_string(o.nodes));
  return ok_status();
}

}  // namespace

std::pair<int, std::string> threads_per_rank(const recipes::Recipe& r, int per_node, int cores) {
  int threads = static_cast<int>(r.launch.threads_per_rank);
  std::string why;
  if (threads > 0) {
    why = "launch.threads_per_rank";
  } else if (r.comm.backend == "nccl") {
    threads = 1;
    why = "GPU ranks: the device computes";
  } else {
    threads = std::max(1, cores / per_node);
    why = "the node's " + std::to_string(cores) + " cores shared among its ranks";
  }
  const int used = per_node * threads;
  if (used < cores) {
    why += "; " + std::to_string(cores - used) + " of " + std::to_string(cores) + " cores idle (" +
           std::to_string(per_node) + " ranks x " + std::to_string(threads) + " threads)";
  } else if (used > cores) {
    why += "; " + std::to_string(used) + " threads on " + std::to_string(cores) +
           " cores: they share them";
  }
  return {threads, why};
}

Result<std::pair<int, int>> parse_node_count(std::string_view text) {
  const auto bad = [&] {
    return invalid_input("'" + strings::printable(std::string(text.substr(0, 64)), "") +
                         "' is not a node count from 1 to 4096 or a range MIN-MAX of them");
  };
  const size_t dash = text.find('-');
  auto one = [](std::string_view t) -> std::optional<int> {
    if (t.empty() || t.size() > 4 ||
        !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    auto v = strings::parse_int(t);
    if (!v || *v < 1 || *v > 4096) return std::nullopt;
    return static_cast<int>(*v);
  };
  if (dash == std::string_view::npos) {
    auto n = one(text);
    if (!n) return bad();
    return std::pair<int, int>{*n, 0};
  }
  auto lo = one(text.substr(0, dash));
  auto hi = one(text.substr(dash + 1));
  if (!lo || !hi) return bad();
  if (*lo > *hi) {
    return invalid_input("'" + std::string(text) + "': the least nodes (" + std::to_string(*lo) +
                         ") are more than the most (" + std::to_string(*hi) + ")");
  }
  return std::pair<int, int>{*lo, *hi == *lo ? 0 : *hi};
}

namespace {

// The job's hosts (make_job's phase for -H / --hostfile): each must hold `per_node` ranks
// (a host named without slots, one: Open MPI's default, takes them, as `dltune run -H` is then
// told; one given more slots, but fewer than that, is refused); their names go to job->hosts.
// The shape came from `cores`: the first host's own when `hosts_topology` (asked over ssh), else
// this machine's; a note says which when this machine is none of the hosts (a login node).
Status take_hosts(const std::vector<HostSlots>& hosts, int per_node, int cores, bool hosts_topology,
                  Job* job) {
  for (const HostSlots& h : hosts) {
    if (h.slots > 1 && h.slots < per_node) {
      return invalid_input(std::to_string(per_node * static_cast<int>(hosts.size())) +
                           " ranks over " + std::to_string(hosts.size()) + " hosts are " +
                           std::to_string(per_node) + " per host, and " + h.name + " has " +
                           std::to_string(h.slots) + " slots");
    }
    job->hosts.push_back(h.name);
  }
  if (!hosts.empty() && std::none_of(hosts.begin(), hosts.end(),
                                     [](const HostSlots& h) { return is_this_host(h.name); })) {
    job->notes.push_back(
        hosts_topology
            ? "the job is planned with " + hosts[0].name + "'s own topology (asked over ssh: " +
                  std::to_string(cores) + " cores), the other hosts taken to be alike"
            : "the job is planned with this machine's " + std::to_string(cores) +
                  " cores (the hosts' own were not asked): launch from one of the hosts when "
                  "their cores differ");
  }
  return ok_status();
}

}  // namespace

Result<Job> make_job(const JobOptions& o, const topology::Topology& topo) {
  Job job;
  auto recipe = recipes::load_recipe_with_overrides(o.recipe, o.overrides, &job.notes);
  if (!recipe) return std::move(recipe).error();
  job.recipe = std::move(*recipe);
  job.recipe_path = job.recipe.source_path;
  auto backend = o.backend.empty() ? default_backend() : parse_backend(o.backend);
  if (!backend) return std::move(backend).error().wrap("--backend");
  job.backend = *backend;
  const bool slurm = job.backend == Backend::kSlurm;
  if (slurm && !o.hosts.empty()) {
    return invalid_input(
        "-H / --hostfile start the ranks over ssh; under Slurm, srun places "
        "them (drop --backend slurm, or drop the hosts)");
  }
  // GPU ranks on a machine without a GPU would tune, then fail as they start (issue 42): refuse
  // before anything runs. (Slurm's nodes are not this one: their ranks check for themselves.)
  if (!slurm && job.recipe.comm.backend == "nccl" && topo.gpus.empty()) {
    return invalid_input(
        "comm.backend nccl runs one rank per GPU, and hwloc finds no GPU on this machine; use "
        "comm.backend auto (or mpi) to train on its CPUs, or launch on a GPU node");
  }
  const int excluded = static_cast<int>(o.exclude.size());
  // launch.spare_nodes: the allocation's nodes beyond the job's, held for a lost node's place.
  const int spare = slurm ? static_cast<int>(job.recipe.launch.spare_nodes) : 0;
  const int allocated = allocation_nodes();
  int nodes = o.nodes > 0 ? o.nodes : (slurm ? std::max(allocated - excluded - spare, 1) : 1);
  const bool range = o.nodes_max > 0;
  std::vector<HostSlots> hosts;
  if (!o.hosts.empty()) {
    if (range) return invalid_input("--nodes MIN-MAX needs Slurm; with -H the hosts are fixed");
    auto mine = job_hosts(o.hosts, o.nodes);
    if (!mine) return std::move(mine).error();
    hosts = std::move(*mine);
    nodes = static_cast<int>(hosts.size());
  }
  if (range)
    DLTUNE_TRY(take_node_range(o, slurm, allocated - excluded - spare, excluded > 0, spare > 0,
                               &job, &nodes));
  if (!slurm && nodes > 1 && hosts.empty()) {
    return invalid_input("--nodes " + std::to_string(nodes) +
                         " needs the slurm backend (run inside an allocation or pass "
                         "--backend slurm)");
  }
  int ranks = o.ranks > 0 ? o.ranks : static_cast<int>(job.recipe.launch.ranks);
  // With --nodes MIN-MAX, launch.ranks_per_node comes before the allocation's tasks.
  if (ranks <= 0 && slurm && !(range && job.recipe.launch.ranks_per_node > 0)) {
    ranks = env_int("SLURM_NTASKS");
    // The allocation's tasks include the spare nodes' (salloc was asked for them too), and
    // with --nodes MIN-MAX those of nodes beyond MAX.
    if ((spare > 0 || range) && allocated > 0 && ranks % allocated == 0)
      ranks = ranks / allocated * nodes;
  }
  if (ranks <= 0 && job.recipe.launch.ranks_per_node > 0) {
    ranks = nodes * static_cast<int>(job.recipe.launch.ranks_per_node);
  }
  const bool even_slots =
      !hosts.empty() && std::all_of(hosts.begin(), hosts.end(),
                                    [&](const HostSlots& h) { return h.slots == hosts[0].slots; });
  if (ranks <= 0 && even_slots && hosts[0].slots > 1) ranks = nodes * hosts[0].slots;
  const int cores = std::max(1, static_cast<int>(topo.cores.size()));
  job.shape_auto = ranks <= 0 && !slurm && hosts.empty() && nodes == 1 && topo.gpus.empty() &&
                   job.recipe.comm.backend != "nccl" && job.recipe.launch.threads_per_rank <= 0;
  if (ranks <= 0) ranks = nodes * auto_ranks_per_node(job.recipe, topo, cores);
  if (slurm && in_slurm_allocation() && allocated > 0 && nodes > allocated - excluded) {
    return invalid_input("--nodes " + std::to_string(nodes) + ": this allocation has " +
                         std::to_string(allocated - excluded) + " node(s)" +
                         (excluded > 0 ? " besides the lost ones" : "") +
                         "; ask salloc/sbatch for " + std::to_string(nodes) + " or lower --nodes");
  }
  if (ranks % nodes != 0) {
    return invalid_input(std::to_string(ranks) + " ranks do not divide evenly over " +
                         std::to_string(nodes) + " nodes; choose -n as a multiple of --nodes");
  }
  DLTUNE_TRY(take_hosts(hosts, ranks / nodes, cores, is_host_topology(topo), &job));
  job.ranks = ranks;
  job.run_options = o.run_options;
  if (slurm) job.exclude = o.exclude;
  const auto [threads, why] = threads_per_rank(job.recipe, ranks / nodes, cores);
  job.shape = recipes::JobShape{nodes, ranks / nodes, threads};
  job.threads_reason = why;
  // training.precision auto: bf16 where this CPU computes it in hardware (the engine's bf16 on
  // a CPU without it rounds as bf16 but runs at fp32 speed: no reason to choose it).
  if (job.recipe.training.precision == "auto") {
    const bool bf16 = engine::cpu_features().bf16_hardware();
    job.recipe.training.precision = bf16 ? "bf16" : "fp32";
    job.precision_reason = bf16 ? "auto: this CPU has bf16 instructions (AVX512-BF16 or AMX)"
                                : "auto: this CPU has no bf16 instructions (AVX512-BF16, AMX), so "
                                  "bf16 would run at fp32 speed";
  }
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
                 int* exit_code, const std::string& plan_file, const std::string& recipe_file,
                 bool placed, LaunchOutcome* outcome) {
  // Each launch runs in a `dltune run` child: libpmix's server cannot be started twice in one
  // process, and a launch does several (collective sweep, trials, training).
  auto self = cli::sibling_program("dltune");  // this binary
  if (!self) return self.error();
  std::vector<std::string> cmd = launch_prefix(job, plan_file, recipe_file, placed);
  cmd[0] = *self;
  std::optional<TempDir> tmp;
  if (outcome != nullptr) {
    auto t = TempDir::create_in_tmp("dltune-outcome-");
    if (!t) return std::move(t).error().wrap(phase);
    tmp.emplace(std::move(*t));
    cmd.insert(cmd.end() - 1, {"--outcome-file", tmp->path() + "/outcome.json"});  // before "--"
  }
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  auto rc = cli::run_to_completion(cmd, "launch");
  if (!rc) return std::move(rc).error().wrap(phase);
  if (exit_code != nullptr) *exit_code = *rc;
  if (outcome != nullptr) {
    auto text = paths::read_file(tmp->path() + "/outcome.json");
    auto o = text ? outcome_from_json(*text) : Result<LaunchOutcome>(text.error());
    if (o && o->exit_code == *rc) {
      *outcome = std::move(*o);
    } else {
      *outcome = LaunchOutcome{*rc, "", cli::forwarded_signal() != 0, ""};
    }
    if (*rc != 0 && !outcome->interrupted) {
      return peer_failed(
          phase + " failed (" +
          (outcome->message.empty() ? "the launcher's message is above" : outcome->message) +
          "; exit code " + std::to_string(*rc) + ")");
    }
  }
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

std::vector<std::string> launch_prefix(const Job& job, const std::string& plan_file,
                                       const std::string& recipe_file, bool placed) {
  std::vector<std::string> p = {"dltune", "run", "-n", std::to_string(job.ranks)};
  if (!job.hosts.empty()) {
    const size_t n = std::min(job.hosts.size(), static_cast<size_t>(job.shape.nodes));
    const std::vector<std::string> mine(job.hosts.begin(), job.hosts.begin() + n);
    p.insert(p.end(), {"-H", host_option(mine, job.shape.ranks_per_node)});
  } else if (job.backend == Backend::kSlurm) {
    p.insert(p.end(), {"--nodes", std::to_string(job.shape.nodes), "--backend", "slurm"});
    if (!job.exclude.empty()) p.insert(p.end(), {"--exclude", strings::join(job.exclude, ",")});
  } else {
    p.insert(p.end(), {"--backend", "local"});
  }
  if (!placed) p.insert(p.end(), {"--bind", job.recipe.launch.binding});
  if (!plan_file.empty()) p.insert(p.end(), {"--plan", plan_file});
  if (!recipe_file.empty()) p.insert(p.end(), {"--recipe", recipe_file});
  p.insert(p.end(), job.run_options.begin(), job.run_options.end());
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

recipes::Plan baseline_plan(const recipes::Plan& plan) {
  recipes::Plan one = plan;
  const recipes::TrainingPlan& t = plan.training;
  const int64_t replicas = std::max(1, plan.parallel.replicas);
  const int64_t replica_batch = t.scaling == recipes::Scaling::kWeak
                                    ? t.per_rank_batch
                                    : (t.global_batch + replicas - 1) / replicas;
  one.training.scaling = recipes::Scaling::kWeak;
  one.training.per_rank_batch = replica_batch;
  one.training.global_batch = replica_batch;
  one.parallel.stages = 1;
  one.parallel.partition.clear();
  one.parallel.recompute = recipes::Recompute::kNone;
  one.set_job({1, 1, plan.job.threads_per_rank});  // rank 0's threads
  one.placement.clear();
  return one;
}

double baseline_budget_s(double training_s) {
  return std::clamp(kBaselineShare * training_s, kBaselineMinBudgetS, kBaselineMaxS);
}

int64_t baseline_first_steps(double step_s, double budget_s) {
  const double step = step_s > 0 ? step_s : 0.05;
  const auto most = static_cast<int64_t>(std::ceil(0.8 * budget_s / step));
  const auto fit = static_cast<int64_t>(std::floor(budget_s / step));
  return std::max(most, std::min(kBaselineMinSteps, std::max(kBaselineFewestSteps, fit)));
}

Result<Baseline> measure_baseline(const Job& job, const std::string& worker,
                                  const recipes::Plan& plan, double step_s, double budget_s,
                                  const RunDir& dir, Progress* progress) {
  return measure_throughput(baseline_job(job), worker, baseline_plan(plan), "the 1-rank baseline",
                            dir.file("baseline_"), step_s, budget_s, progress);
}

Result<Baseline> measure_throughput(const Job& job, const std::string& worker,
                                    const recipes::Plan& plan, const std::string& what,
                                    const std::string& files, double step_s, double budget_s,
                                    Progress* progress) {
  const std::string plan_path = files + "plan.json";
  const std::string recipe_path = files + "recipe.yaml";
  const std::string metrics = files + "metrics.jsonl";
  const std::string out = files + "summary.json";
  DLTUNE_TRY_CTX(paths::write_file_atomic(plan_path, recipes::serialize_plan(plan)),
                 "writing " + plan_path);
  int64_t steps = baseline_first_steps(step_s, budget_s);
  Baseline b;
  b.bind = job.recipe.launch.binding;
  for (;;) {
    // Step time does not depend on the learning rate, but a rate scaled for the job's global
    // batch can make one rank's loss NaN, which ends a training run. 1e-12 keeps every update
    // a normal float (no denormal slow path) while the weights stay put.
    std::vector<std::string> sets = {"training.steps=" + std::to_string(steps),
                                     "training.optimizer.lr=1e-12"};
    if (job.recipe.data.samples > 0) sets.push_back("data.heldout=0");  // synthetic: no eval
    std::vector<recipes::Override> overrides;
    for (const std::string& text : sets) {
      auto ov = recipes::parse_override(text);
      if (!ov) return ov.error();
      overrides.push_back(std::move(*ov));
    }
    auto yaml = recipes::recipe_yaml_as_run(job.recipe_path, job.recipe, overrides);
    if (!yaml) return yaml.error().wrap(what + ": its recipe");
    DLTUNE_TRY_CTX(paths::write_file_atomic(recipe_path, *yaml), "writing " + recipe_path);
    std::remove(metrics.c_str());  // the metrics writer appends
    {
      MetricsFollower follow(metrics, static_cast<long>(steps), progress);
      DLTUNE_TRY(run_ranks(job, what, {worker, "train", "--metrics", metrics, "--summary", out},
                           nullptr, plan_path, recipe_path, !plan.placement.empty()));
    }
    auto text = paths::read_file(out);
    if (!text) return text.error();
    auto j = nlohmann::json::parse(*text, nullptr, false);
    const double sps = j.is_object() ? j.value("throughput_sps", 0.0) : 0.0;
    if (!(sps > 0)) return internal_error(out + " holds no throughput");
    const std::vector<double> times = step_times(metrics);
    b.sps = sps;
    b.steps = steps;
    b.rel_ci = stats::mean_rel_ci_batched(times);
    const double run_s =
        static_cast<double>(steps) * static_cast<double>(plan.training.global_batch) / sps;
    b.seconds += run_s;
    if (b.rel_ci <= kBaselineRelCi || b.seconds + 4 * run_s > budget_s) break;
    steps *= 4;
  }
  return b;
}

}  // namespace dltune::launcher
