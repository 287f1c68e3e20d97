// The embedded PMIx server of the local launch backend (libpmix 4.x).
//
// Flow (runtime-facts.md): start() -> register_job() -> for each rank setup_rank(), then fork
// and exec with the returned environment -> supervise -> the destructor deregisters the job
// and finalizes the server. One PmixServer per process at a time (libpmix has one server
// instance per process).
//
// The server answers the ranks on its own progress thread. What the supervisor needs from it
// (a rank called PMIx_Abort, a rank connected or finalized) is recorded here and can be polled
// with rank_state(); event_fd() becomes readable whenever a rank aborts, so a poll() loop
// wakes up at once. Open MPI's PMIx_Log messages are written to stderr.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/backend/env_block.h"
#include "launcher/backend/host_list.h"
#include "topology/topology.h"

namespace dltune::launcher {

// What the server has seen of one rank.
struct RankPmixState {
  bool connected = false;  // called PMIx_Init
  bool finalized = false;  // called PMIx_Finalize
  bool aborted = false;    // called PMIx_Abort (MPI_Abort)
  int abort_status = 0;
  std::string abort_message;
  // The server lost the rank's connection before PMIx_Finalize (it died or exited early).
  // The server notices this the moment the rank's socket closes, before its peers can react
  // and before the launcher reaps anything, so it tells which rank went first.
  bool lost = false;
};

// One job: its ranks 0..nranks-1 all on this node, or (`nodes` given: the ssh backend) spread
// over several nodes, `nodes[node]` being this one. Every node's server registers the same
// maps, so that a rank finds any peer's node and host.
struct PmixJobSpec {
  std::string nspace;  // unique per launch (the same on every node of one job)
  int nranks = 1;
  std::string hostname;          // this node's name
  std::string plan_blob;         // published as the job-level key comm::kPlanKey ("" = none)
  std::string recipe_blob;       // published as the job-level key comm::kRecipeKey ("" = none)
  std::vector<NodeRanks> nodes;  // every node and its ranks, in rank order; empty: one node
  int node = 0;                  // this node's index in `nodes`
};

// Carries a fence across nodes (the ssh backend's node link). `key` says which fence it is:
// the indexes of the nodes taking part, ';', then its participants ("0,1;*" for the whole job);
// `data` is what this node's ranks contributed. `done` must be called exactly once, from any
// thread, with every participating node's data concatenated in node order (ok = true), or
// with ok = false when the fence cannot complete (the job is ending).
using FenceDone = std::function<void(bool ok, std::string all)>;
using FenceRelay = std::function<void(const std::string& key, std::string data, FenceDone done)>;

class PmixServer {
 public:
  // Starts the server with all its rendezvous and temporary files inside `tmpdir` (which
  // must exist and be private to this launch). `machine`, when given, is this machine's
  // loaded hwloc topology: the server uses it (and keeps it alive) instead of discovering the
  // machine again, which costs as much as dltune's own discovery (~25 ms here). Failure:
  // kInternal with libpmix's reason, or kUnsupported in a build without PMIx; nothing is
  // left running.
  // With a `relay`, every fence goes through it (a job over several nodes), and the server
  // calls this node `node_name` (its name in register_job's node map); without one, the server
  // completes fences among its own clients.
  static Result<std::unique_ptr<PmixServer>> start(const std::string& tmpdir,
                                                   std::shared_ptr<hwloc_topology> machine = {},
                                                   FenceRelay relay = {},
                                                   const std::string& node_name = "");
  ~PmixServer();
  PmixServer(const PmixServer&) = delete;
  PmixServer& operator=(const PmixServer&) = delete;

  // Registers the job's namespace with the node and process maps and job-level data (sizes,
  // local peers, the plan). Failure: kInternal; the server stays usable.
  Status register_job(const PmixJobSpec& job);
  // Registers `rank` (one of this node's) as a client and adds the PMIx variables it needs to
  // `env`. Precondition: register_job() succeeded. Failure: kInternal.
  Status setup_rank(int rank, EnvBlock& env);

  // A snapshot of what the server has seen of `rank` (thread-safe).
  RankPmixState rank_state(int rank) const;
  // The first rank whose connection the server lost before it called PMIx_Finalize, or -1
  // when none did (thread-safe).
  int first_lost_rank() const;
  // The first rank that called PMIx_Finalize, or -1 (thread-safe). A rank that fails right
  // after PMIx_Finalize strands its peers in a fence, and can take longer to exit than they
  // take to fail: its finalize, not its death, comes first.
  int first_finalized_rank() const;
  // A file descriptor that becomes readable when a rank aborts; the caller drains it with
  // drain_events(). -1 when the build has no PMIx.
  int event_fd() const;
  void drain_events();

  class Impl;

 private:
  explicit PmixServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// True when this build embeds a PMIx server.
bool pmix_server_available();

}  // namespace dltune::launcher
