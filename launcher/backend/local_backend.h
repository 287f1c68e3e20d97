// The local launch backend: every rank on this machine, as clients of an embedded PMIx
// server (launcher/pmix_server.h), supervised by launcher/supervisor.h.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/backend/host_list.h"
#include "launcher/backend/launch_spec.h"
#include "launcher/backend/pmix_server.h"
#include "launcher/backend/supervisor.h"

namespace dltune::launcher {

// Starts spec.nranks ranks of spec.argv here, each bound and given its GPU / NIC by
// topology::place() (spec.bind), with RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE and
// the Open MPI direct-launch variables set, and waits for them (see Supervisor's policy).
// A rank that connected to PMIx and exits 0 without PMIx_Finalize, or that calls
// PMIx_Abort / MPI_Abort, counts as failed. Every temporary directory (the PMIx rendezvous,
// Open MPI's session and shared-memory files) is removed before returning.
// Success: the outcome (exit code 0, 1, 130 or 143 and its sentence).
// Failure (nothing is left running): kInvalidInput / kNotFound for a bad spec (validate_spec),
// kUnsupported without PMIx, kIo / kInternal when the server or a fork cannot start.
//
// With `share` (the ssh backend's node daemon, ssh_backend.h), this node runs only its part of
// a job of spec.nranks ranks over several nodes: the ranks share->nodes[share->node] names,
// each with its global rank, its node's LOCAL_RANK and the job's MASTER_ADDR / MASTER_PORT,
// under a PMIx server whose fences cross nodes through share->relay. A readable
// share->stop_fd ends the node's ranks with share->stop_check()'s failure; share->on_stop
// hears this node's first failure (or signal) the moment it happens.
struct NodeShare {
  std::vector<NodeRanks> nodes;  // every node of the job and its ranks
  int node = 0;                  // this node's index
  std::string nspace;            // the job's PMIx namespace, the same on every node
  std::string master_addr;       // PyTorch's rendezvous: rank 0's node as the others reach it
  int master_port = 0;
  FenceRelay relay;
  int stop_fd = -1;
  std::function<Failure()> stop_check;
  std::function<void(const Failure&)> on_stop;
};
Result<LaunchOutcome> run_local(const LaunchSpec& spec, const NodeShare* share = nullptr);

}  // namespace dltune::launcher
