#include "launcher/backend/local_backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>

#include <sched.h>
#include <unistd.h>

#include "common/log.h"
#include "common/paths.h"
#include "launcher/backend/env_block.h"
#include "launcher/backend/plan_env.h"
#include "launcher/backend/pmix_server.h"
#include "launcher/backend/rank_env.h"
#include "launcher/backend/rank_output.h"
#include "launcher/backend/supervisor.h"
#include "launcher/backend/temp_dir.h"
#include "topology/topology.h"

extern char** environ;

namespace dltune::launcher {
namespace {

std::string this_hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

void warn(const LaunchSpec& spec, const std::string& what) {
  if (spec.warn) {
    spec.warn(what);
  } else {
    DLTUNE_LOG(kWarn, "launch") << what;
  }
}

// Placement for the ranks (none with --bind none). The machine is discovered even then: its
// hwloc handle goes to the PMIx server (`machine`), which would otherwise discover it itself.
// With DLTUNE_TOPO_XML the export places the ranks and PMIx discovers the machine. The plan's
// placement (`from_plan`), when it has one, replaces dltune's unless the user chose --bind.
std::optional<topology::Placement> plan_placement(
    const LaunchSpec& spec, int local_ranks, const std::vector<topology::RankPlacement>& from_plan,
    std::optional<topology::Topology>& topo, std::shared_ptr<hwloc_topology>& machine) {
  auto found = topology::discover_default_keeping_hwloc();
  if (found) machine = std::move(found->hwloc);
  if (spec.bind == topology::BindPolicy::kNone) return std::nullopt;
  if (!found) {
    DLTUNE_LOG(kWarn, "launch") << "no placement (ranks are not bound): "
                                << found.error().message();
    return std::nullopt;
  }
  topo = std::move(found->model);
  if (!from_plan.empty() && !spec.bind_from_user && !spec.map_from_user) {
    return topology::Placement{from_plan, "the plan's placement"};
  }
  const int cores = static_cast<int>(topo->cores.size());
  if (spec.bind == topology::BindPolicy::kCore && cores > 0 && local_ranks > cores) {
    warn(spec, std::to_string(local_ranks) + " ranks on " + std::to_string(cores) +
                   " cores with --bind core: ranks share cores and run slower (mpirun refuses "
                   "this without --oversubscribe)");
  }
  return topology::place(*topo, local_ranks, spec.bind, spec.map);
}

// CPUs this process may run on (its affinity mask; at least 1).
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// The environment of rank `rank`: ours, plus what Open MPI's direct launch needs, the
// placement's variables, the conventional rank variables, the threads its libraries may start
// (unless the user set them) and the spec's extras.
EnvBlock rank_environment(const LaunchSpec& spec, const RankIdentity& id, const TempDir& tmp,
                          const std::string& shm_dir, const EnvList& job_env,
                          const topology::Topology* topo, const topology::RankPlacement* place) {
  EnvBlock env(environ);
  env.set("PMIX_MCA_gds", "hash", false);
  env.set("OMPI_MCA_schizo", "^orte", false);  // direct launch, not a singleton
  env.set("OMPI_MCA_pml", "ob1", false);       // skips ~200 ms of cm probing
  env.set("OMPI_MCA_orte_tmpdir_base", tmp.path(), false);
  if (!shm_dir.empty()) env.set("OMPI_MCA_btl_vader_backing_directory", shm_dir, false);
  // More ranks than CPUs: Open MPI must yield the core while it waits, as mpirun
  // --oversubscribe makes it do. Direct-launched ranks cannot tell, and spun: 4 ranks on 2
  // cores took 5-18 ms per MPI_Allreduce of 4 B-1 MiB, against 4-560 us under mpirun.
  const int cpus = usable_cpus();
  if (id.local_size > cpus) env.set("OMPI_MCA_mpi_yield_when_idle", "1", false);
  if (geteuid() == 0) {
    env.set("OMPI_ALLOW_RUN_AS_ROOT", "1", false);
    env.set("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", false);
  }
  for (const auto& [k, v] : rank_identity_env(id)) {
    env.set(k, v);
  }
  // --plan's file replaces an inherited DLTUNE_PLAN; the runtimes' settings the user made win.
  for (const auto& [k, v] : job_env) env.set(k, v, k == "DLTUNE_PLAN" || k == "DLTUNE_RECIPE");
  if (topo != nullptr && place != nullptr) {
    for (const auto& [k, v] : topology::rank_env(*topo, *place)) env.set(k, v, false);
  }
  const int bound = place != nullptr ? static_cast<int>(place->cpus.size()) : 0;
  for (const auto& [k, v] : thread_env(bound, cpus, id.local_size)) env.set(k, v, false);
  for (const auto& [k, v] : spec.extra_env) env.set(k, v);
  return env;
}

// The job-wide variables: PyTorch's rendezvous on this node (the user's MASTER_ADDR and
// MASTER_PORT win) or the one the head chose for a job over several nodes, and what the plan
// means to external programs (plan_env.h).
Result<EnvList> job_environment(const LaunchSpec& spec, const PlanEnv& plan_env, const TempDir& tmp,
                                const NodeShare* share) {
  EnvList env;
  if (share != nullptr) {
    env = rendezvous_env(share->master_addr, share->master_port);
    auto files = write_plan_files(plan_env, spec.plan_blob, spec.recipe_blob, tmp.path());
    if (!files) return std::move(files).error();
    env.insert(env.end(), files->begin(), files->end());
    return env;
  }
  const char* addr = std::getenv("MASTER_ADDR");  // NOLINT: PyTorch's variable, not ours
  const std::string master = addr != nullptr && *addr != '\0' ? addr : "127.0.0.1";
  const char* port_env = std::getenv("MASTER_PORT");  // NOLINT: as above
  int port = 0;
  if (port_env == nullptr || *port_env == '\0') {
    // Free on every address: PyTorch's store listens on all of them.
    auto p = free_tcp_port("0.0.0.0");
    if (!p) return std::move(p).error().wrap("choosing MASTER_PORT");
    port = *p;
  }
  for (auto& kv : rendezvous_env(master, port)) {
    if (kv.first == "MASTER_PORT" && port == 0) continue;  // the user's
    env.push_back(std::move(kv));
  }
  auto files = write_plan_files(plan_env, spec.plan_blob, spec.recipe_blob, tmp.path());
  if (!files) return std::move(files).error();
  env.insert(env.end(), files->begin(), files->end());
  return env;
}

// A rank that called PMIx_Abort (Open MPI's MPI_Abort does): the job ends with its error code,
// as under mpirun. Open MPI passes "N/A" as the message; only a real message is quoted.
Failure abort_failure(const std::string& who, const std::string& host, const RankPmixState& st) {
  std::string why = who + " on " + host + " called MPI_Abort / PMIx_Abort with error code " +
                    std::to_string(st.abort_status);
  const std::string msg = st.abort_message;
  if (!msg.empty() && msg != "N/A" && msg != "(N/A)") why += ": " + msg;
  const int code = st.abort_status & 0xff;  // what the rank's exit status would carry
  return {why, code != 0 ? code : 1};
}

std::string unique_nspace() {
  static std::atomic<int> counter{0};
  return "dltune." + std::to_string(getpid()) + "." + std::to_string(counter++);
}

}  // namespace

Result<LaunchOutcome> run_local(const LaunchSpec& spec, const NodeShare* share) {
  const auto t0 = std::chrono::steady_clock::now();
  auto ms = [t0] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  DLTUNE_TRY(validate_spec(spec));
  auto path = find_program(spec.argv[0]);
  if (!path) return std::move(path).error();
  // This node's ranks: first .. first + count - 1 of the job's spec.nranks.
  const NodeRanks mine = share != nullptr ? share->nodes.at(static_cast<size_t>(share->node))
                                          : NodeRanks{this_hostname(), 0, spec.nranks};
  const std::string host = mine.host;
  const int first = mine.first_rank, count = mine.count;
  const int node = share != nullptr ? share->node : 0;
  const int nodes = share != nullptr ? static_cast<int>(share->nodes.size()) : 1;

  // What launchers killed with SIGKILL left behind (their ranks are gone: PDEATHSIG).
  sweep_stale_temp_dirs(paths::temp_root(), "dltune-run-");
  sweep_stale_temp_dirs("/dev/shm", "dltune-");
  auto tmp = TempDir::create_in_tmp("dltune-run-");
  if (!tmp) return std::move(tmp).error();
  std::optional<TempDir> shm;
  if (access("/dev/shm", W_OK) == 0) {
    if (auto s = TempDir::create("/dev/shm", "dltune-")) shm = std::move(*s);
  }
  PlanEnv plan_env;
  if (spec.plan) {
    plan_env = plan_env_for(*spec.plan, spec.nranks, count);
    for (const std::string& n : notes_for(plan_env, spec.argv)) warn(spec, "--plan: " + n);
  }
  std::optional<topology::Topology> topo;
  std::shared_ptr<hwloc_topology> machine;
  const auto placement = plan_placement(spec, count, plan_env.placement, topo, machine);
  auto job_env = job_environment(spec, plan_env, *tmp, share);
  if (!job_env) return std::move(job_env).error();
  DLTUNE_LOG(kDebug, "launch") << "directories and placement ready at " << ms() << " ms";

  // Declared after the directories so that it stops the ranks before they are removed, and
  // before the server so that the PMIx threads inherit the blocked signal mask.
  Supervisor sup({false, spec.kill_grace_ms, spec.timeout_s});
  DLTUNE_TRY(sup.install_signal_handling());
  auto output = RankOutput::open(spec.output);
  if (!output) return std::move(output).error();
  if (spec.output.active()) {  // child `index` is rank `first + index`
    sup.set_line_filter([&output, first](int index, bool is_stderr, std::string_view line) {
      return output->line(first + index, is_stderr, line);
    });
  }
  if (share != nullptr) {
    if (share->stop_fd >= 0) sup.watch(share->stop_fd, share->stop_check);
    if (share->on_stop) sup.set_on_stop(share->on_stop);
  }
  auto server =
      PmixServer::start(tmp->path(), std::move(machine), share ? share->relay : FenceRelay{}, host);
  if (!server) return std::move(server).error().wrap("starting the PMIx server");
  PmixServer& srv = **server;
  const std::string nspace = share != nullptr ? share->nspace : unique_nspace();
  PmixJobSpec job{nspace, spec.nranks, host, spec.plan_blob, spec.recipe_blob, {}, node};
  if (share != nullptr) job.nodes = share->nodes;
  DLTUNE_TRY_CTX(srv.register_job(job), "registering the job with the PMIx server");
  DLTUNE_LOG(kDebug, "launch") << "PMIx server up, job registered at " << ms() << " ms";

  sup.set_exit_judge([&srv, &host, &plan_env, first](int index, int status) {
    const int rank = first + index;
    std::string why = Supervisor::default_exit_judgement(rank_label(plan_env, rank), host, status);
    if (!why.empty()) return why;
    const RankPmixState st = srv.rank_state(rank);
    if (st.connected && !st.finalized) {
      return rank_label(plan_env, rank) + " on " + host +
             " exited with code 0 without calling PMIx_Finalize (its peers would wait forever)";
    }
    return std::string();
  });
  sup.set_cause_hint([&srv, first, count] {  // child index == rank - first
    auto index = [&](int rank) {
      return rank >= first && rank < first + count ? rank - first : -1;
    };
    return Supervisor::CauseHints{index(srv.first_lost_rank()), index(srv.first_finalized_rank())};
  });
  sup.watch(srv.event_fd(), [&srv, &host, &plan_env, first, count]() -> Failure {
    srv.drain_events();
    for (int r = first; r < first + count; ++r) {
      const RankPmixState st = srv.rank_state(r);
      if (st.aborted) return abort_failure(rank_label(plan_env, r), host, st);
    }
    return {};
  });

  for (int i = 0; i < count; ++i) {
    const int r = first + i;
    const topology::RankPlacement* rp =
        placement ? &placement->ranks[static_cast<size_t>(i)] : nullptr;
    const RankIdentity id{r, spec.nranks, i, count, node, nodes};
    EnvBlock env = rank_environment(spec, id, *tmp, shm ? shm->path() : "", *job_env,
                                    topo ? &*topo : nullptr, rp);
    DLTUNE_TRY_CTX(srv.setup_rank(r, env), "preparing rank " + std::to_string(r));
    ChildSpec child{*path,
                    spec.argv,
                    env.data(),
                    rp ? rp->cpus : std::vector<int>{},
                    rank_label(plan_env, r),
                    host,
                    /*stdin_from_launcher=*/r == 0};
    auto index = sup.spawn(child);
    if (!index) return std::move(index).error().wrap("starting rank " + std::to_string(r));
  }
  DLTUNE_LOG(kInfo, "launch") << "started " << count << " rank(s) of " << *path << " (nspace "
                              << nspace << ") at " << ms() << " ms";
  auto out = sup.run();
  DLTUNE_LOG(kDebug, "launch") << "all ranks ended at " << ms() << " ms";
  return out;
}

}  // namespace dltune::launcher
