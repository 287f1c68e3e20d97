// dltune-rank-env: what every Slurm task of `dltune run --backend slurm` runs first.
//
//   dltune-rank-env PROGRAM [ARGS...]   set the task's rank variables (launcher/rank_env.h)
//                                       from srun's SLURM_* variables, then exec PROGRAM
//   dltune-rank-env --free-port ADDR    print a TCP port free on ADDR (on this node)
//
// Exit: PROGRAM's own status (it replaces this process); 1 when the task's identity cannot be
// worked out; 127 when PROGRAM cannot be executed; 2 for bad usage.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <sched.h>
#include <unistd.h>

#include "launcher/backend/rank_env.h"

int main(int argc, char** argv) {
  using namespace dltune::launcher;
  if (argc == 3 && std::strcmp(argv[1], "--free-port") == 0) {
    auto port = free_tcp_port(argv[2]);
    if (!port) {
      std::fprintf(stderr, "dltune-rank-env: %s\n", port.error().message().c_str());
      return 1;
    }
    std::printf("%d\n", *port);
    return 0;
  }
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: dltune-rank-env PROGRAM [ARGS...] | dltune-rank-env --free-port ADDR\n");
    return 2;
  }
  auto id = identity_from_slurm([](const char* name) { return std::getenv(name); });
  if (!id) {
    std::fprintf(stderr, "dltune-rank-env: cannot tell this task's rank: %s\n",
                 id.error().message().c_str());
    return 1;
  }
  for (const auto& [k, v] : rank_identity_env(*id)) setenv(k.c_str(), v.c_str(), 1);
  // The threads its libraries may start: srun's binding is this task's affinity mask (a mask
  // narrower than the node's CPUs); unbound, the node's CPUs shared among its tasks. The user's
  // settings win.
  cpu_set_t set;
  CPU_ZERO(&set);
  const int mine = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const int bound = online > 0 && mine < online ? mine : 0;
  for (const auto& [k, v] : thread_env(bound, mine, id->local_size)) {
    setenv(k.c_str(), v.c_str(), 0);
  }
  execvp(argv[1], argv + 1);
  std::fprintf(stderr, "dltune-rank-env: cannot execute '%s': %s\n", argv[1], std::strerror(errno));
  return 127;
}
