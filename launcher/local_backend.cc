#include "launcher/local_backend.h"

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
#include "launcher/env_block.h"
#include "launcher/pmix_server.h"
#include "launcher/supervisor.h"
#include "launcher/temp_dir.h"
#include "topology/topology.h"

extern char** environ;

namespace dltune::launcher {
namespace {

std::string this_hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// Placement for the ranks (none with --bind none). The machine is discovered even then: its
// hwloc handle goes to the PMIx server (`machine`), which would otherwise discover it itself.
// With DLTUNE_TOPO_XML the export places the ranks and PMIx discovers the machine.
std::optional<topology::Placement> plan_placement(const LaunchSpec& spec,
                                                  std::optional<topology::Topology>& topo,
                                                  std::shared_ptr<hwloc_topology>& machine) {
  auto found = topology::discover_default_keeping_hwloc();
  if (found) machine = std::move(found->hwloc);
  if (spec.bind == topology::BindPolicy::kNone) return std::nullopt;
  if (!found) {
    DLTUNE_LOG(kWarn, "launch") << "no placement (ranks are not bound): "
                                << found.error().message();
    return std::nullopt;
  }
  topo = std::move(found->model);
  return topology::place(*topo, spec.nranks, spec.bind);
}

// CPUs this process may run on (its affinity mask; at least 1).
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// The environment of rank `rank`: ours, plus what Open MPI's direct launch needs, the
// placement's variables, the conventional rank variables and the spec's extras.
EnvBlock rank_environment(const LaunchSpec& spec, int rank, const TempDir& tmp,
                          const std::string& shm_dir, const topology::Topology* topo,
                          const topology::RankPlacement* place) {
  EnvBlock env(environ);
  env.set("PMIX_MCA_gds", "hash", false);
  env.set("OMPI_MCA_schizo", "^orte", false);  // direct launch, not a singleton
  env.set("OMPI_MCA_pml", "ob1", false);       // skips ~200 ms of cm probing
  env.set("OMPI_MCA_orte_tmpdir_base", tmp.path(), false);
  if (!shm_dir.empty()) env.set("OMPI_MCA_btl_vader_backing_directory", shm_dir, false);
  // More ranks than CPUs: Open MPI must yield the core while it waits, as mpirun
  // --oversubscribe makes it do. Direct-launched ranks cannot tell, and spun: 4 ranks on 2
  // cores took 5-18 ms per MPI_Allreduce of 4 B-1 MiB, against 4-560 us under mpirun.
  if (spec.nranks > usable_cpus()) env.set("OMPI_MCA_mpi_yield_when_idle", "1", false);
  if (geteuid() == 0) {
    env.set("OMPI_ALLOW_RUN_AS_ROOT", "1", false);
    env.set("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", false);
  }
  env.set("RANK", std::to_string(rank));
  env.set("WORLD_SIZE", std::to_string(spec.nranks));
  env.set("LOCAL_RANK", std::to_string(rank));
  env.set("LOCAL_WORLD_SIZE", std::to_string(spec.nranks));
  if (topo != nullptr && place != nullptr) {
    for (const auto& [k, v] : topology::rank_env(*topo, *place)) env.set(k, v, false);
  }
  for (const auto& [k, v] : spec.extra_env) env.set(k, v);
  return env;
}

std::string unique_nspace() {
  static std::atomic<int> counter{0};
  return "dltune." + std::to_string(getpid()) + "." + std::to_string(counter++);
}

}  // namespace

Result<LaunchOutcome> run_local(const LaunchSpec& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  auto ms = [t0] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  DLTUNE_TRY(validate_spec(spec));
  auto path = find_program(spec.argv[0]);
  if (!path) return std::move(path).error();
  const std::string host = this_hostname();

  // What launchers killed with SIGKILL left behind (their ranks are gone: PDEATHSIG).
  const char* tmpdir = std::getenv("TMPDIR");  // NOLINT: the system's, not a DLTUNE_* setting
  sweep_stale_temp_dirs(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp", "dltune-run-");
  sweep_stale_temp_dirs("/dev/shm", "dltune-");
  auto tmp = TempDir::create_in_tmp("dltune-run-");
  if (!tmp) return std::move(tmp).error();
  std::optional<TempDir> shm;
  if (access("/dev/shm", W_OK) == 0) {
    if (auto s = TempDir::create("/dev/shm", "dltune-")) shm = std::move(*s);
  }
  std::optional<topology::Topology> topo;
  std::shared_ptr<hwloc_topology> machine;
  const auto placement = plan_placement(spec, topo, machine);
  DLTUNE_LOG(kDebug, "launch") << "directories and placement ready at " << ms() << " ms";

  // Declared after the directories so that it stops the ranks before they are removed, and
  // before the server so that the PMIx threads inherit the blocked signal mask.
  Supervisor sup({spec.tag_output, spec.kill_grace_ms, spec.timeout_s});
  DLTUNE_TRY(sup.install_signal_handling());
  auto server = PmixServer::start(tmp->path(), std::move(machine));
  if (!server) return std::move(server).error().wrap("starting the PMIx server");
  PmixServer& srv = **server;
  const std::string nspace = unique_nspace();
  DLTUNE_TRY_CTX(srv.register_job({nspace, spec.nranks, host, spec.plan_blob}),
                 "registering the job with the PMIx server");
  DLTUNE_LOG(kDebug, "launch") << "PMIx server up, job registered at " << ms() << " ms";

  sup.set_exit_judge([&srv, &host](int rank, int status) {
    std::string why =
        Supervisor::default_exit_judgement("rank " + std::to_string(rank), host, status);
    if (!why.empty()) return why;
    const RankPmixState st = srv.rank_state(rank);
    if (st.connected && !st.finalized) {
      return "rank " + std::to_string(rank) + " on " + host +
             " exited with code 0 without calling PMIx_Finalize (its peers would wait forever)";
    }
    return std::string();
  });
  sup.set_cause_hint([&srv] { return srv.first_lost_rank(); });  // child index == rank
  sup.watch(srv.event_fd(), [&srv, &host, n = spec.nranks]() -> std::string {
    srv.drain_events();
    for (int r = 0; r < n; ++r) {
      const RankPmixState st = srv.rank_state(r);
      if (!st.aborted) continue;
      return "rank " + std::to_string(r) + " on " + host + " aborted with status " +
             std::to_string(st.abort_status) +
             (st.abort_message.empty() ? "" : " (" + st.abort_message + ")");
    }
    return std::string();
  });

  for (int r = 0; r < spec.nranks; ++r) {
    const topology::RankPlacement* rp =
        placement ? &placement->ranks[static_cast<size_t>(r)] : nullptr;
    EnvBlock env =
        rank_environment(spec, r, *tmp, shm ? shm->path() : "", topo ? &*topo : nullptr, rp);
    DLTUNE_TRY_CTX(srv.setup_rank(r, env), "preparing rank " + std::to_string(r));
    ChildSpec child{*path,
                    spec.argv,
                    env.data(),
                    rp ? rp->cpus : std::vector<int>{},
                    "rank " + std::to_string(r),
                    host};
    auto index = sup.spawn(child);
    if (!index) return std::move(index).error().wrap("starting rank " + std::to_string(r));
  }
  DLTUNE_LOG(kInfo, "launch") << "started " << spec.nranks << " rank(s) of " << *path << " (nspace "
                              << nspace << ") at " << ms() << " ms";
  auto out = sup.run();
  DLTUNE_LOG(kDebug, "launch") << "all ranks ended at " << ms() << " ms";
  return out;
}

}  // namespace dltune::launcher
