// A PMIx probe rank for the launcher tests: publishes an endpoint, fences, reads every peer's
// endpoint and prints one line of what it learned. Fault modes make one rank misbehave.
//
//   pmix_probe [--fault exit3|kill-in-fence|hang|no-finalize] [--fault-rank R]
//              [--marker TEXT]
//
// Output (stdout, one line per rank):
//   probe rank=R size=S local_rank=L local_size=LS node=N/NN host=H peers=ok plan=<bytes>
// Exit: 0 on success, 4 when an endpoint was wrong or missing, 5 when bootstrap failed.
#include <cstdio>
#include <cstring>
#include <string>

#include <signal.h>
#include <unistd.h>

#include "comm/bootstrap/bootstrap.h"

using dltune::comm::Bootstrap;

namespace {

std::string endpoint_of(int rank, const std::string& host) {
  return "ep-" + std::to_string(rank) + "@" + host + std::string("\0bin", 4);
}

}  // namespace

int main(int argc, char** argv) {
  std::string fault;
  int fault_rank = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--fault") == 0) fault = argv[i + 1];
    if (std::strcmp(argv[i], "--fault-rank") == 0) fault_rank = std::atoi(argv[i + 1]);
  }
  auto boot = Bootstrap::init();
  if (!boot) {
    std::fprintf(stderr, "probe: %s\n", boot.error().message().c_str());
    return 5;
  }
  const bool me = boot->rank() == fault_rank;
  if (me && fault == "exit3") return 3;
  if (!boot->put("ep", endpoint_of(boot->rank(), boot->hostname())).ok() || !boot->commit().ok()) {
    return 5;
  }
  if (me && fault == "kill-in-fence") {
    usleep(300 * 1000);  // let the peers block in the fence first
    raise(SIGKILL);
  }
  if (auto st = boot->fence(); !st.ok()) {
    std::fprintf(stderr, "probe: %s\n", st.error().message().c_str());
    return 5;
  }
  bool peers_ok = true;
  for (int r = 0; r < boot->size(); ++r) {
    auto ep = boot->get(r, "ep");
    // The peer's host is inside its endpoint; check the rank part and the binary tail.
    const std::string want_prefix = "ep-" + std::to_string(r) + "@";
    if (!ep || ep->compare(0, want_prefix.size(), want_prefix) != 0 || ep->size() < 4 ||
        ep->substr(ep->size() - 4) != std::string("\0bin", 4)) {
      peers_ok = false;
    }
  }
  auto plan = boot->plan_blob();
  std::printf(
      "probe rank=%d size=%d local_rank=%d local_size=%d node=%d/%d host=%s peers=%s "
      "plan=%s\n",
      boot->rank(), boot->size(), boot->local_rank(), boot->local_size(), boot->node_index(),
      boot->num_nodes(), boot->hostname().c_str(), peers_ok ? "ok" : "bad",
      plan ? plan->c_str() : "<error>");
  std::fflush(stdout);
  if (me && fault == "no-finalize") _exit(0);
  if (me && fault == "hang") {  // wired up, then stuck; deaf to SIGTERM
    signal(SIGTERM, SIG_IGN);
    for (;;) pause();
  }
  (void)boot->finalize();
  return peers_ok ? 0 : 4;
}
