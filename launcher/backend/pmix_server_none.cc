// PmixServer in a build without libpmix: the local backend reports that it cannot start
// PMIx ranks (plain programs still need a server for their environment, so none start).
#include "launcher/backend/pmix_server.h"

namespace dltune::launcher {

class PmixServer::Impl {};

bool pmix_server_available() { return false; }

Result<std::unique_ptr<PmixServer>> PmixServer::start(const std::string&,
                                                      std::shared_ptr<hwloc_topology>, FenceRelay,
                                                      const std::string&) {
  return unsupported(
      "this dltune was built without PMIx (libpmix-dev); rebuild with DLTUNE_WITH_PMIX=ON");
}
PmixServer::PmixServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PmixServer::~PmixServer() = default;
Status PmixServer::register_job(const PmixJobSpec&) { return unsupported("no PMIx in this build"); }
Status PmixServer::setup_rank(int, EnvBlock&) { return unsupported("no PMIx in this build"); }
RankPmixState PmixServer::rank_state(int) const { return {}; }
int PmixServer::first_lost_rank() const { return -1; }
int PmixServer::first_finalized_rank() const { return -1; }
int PmixServer::event_fd() const { return -1; }
void PmixServer::drain_events() {}

}  // namespace dltune::launcher
