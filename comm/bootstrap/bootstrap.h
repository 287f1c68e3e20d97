// The rank side of a launch: who am I, where are my peers, what plan do I run.
//
// Every rank started by `dltune run` (embedded PMIx server) or by `srun --mpi=pmix` is a PMIx
// client. Bootstrap wraps that client in the shape of gloo's rendezvous store:
//
//   auto boot = comm::Bootstrap::init();
//   if (!boot) return boot.error().wrap("starting rank");
//   boot->put("addr", my_address);            // publish an endpoint
//   DLTUNE_TRY(boot->commit());
//   DLTUNE_TRY(boot->fence());                // wait for every rank's commit
//   auto peer = boot->get(1, "addr");         // read rank 1's endpoint
//
// Run by hand with no PMIx server (no PMIX_NAMESPACE in the environment), or in a build
// without PMIx, a process is rank 0 of 1: put/get work on a local table, fence returns at
// once, and one INFO line on subsystem "pmix" says so.
//
// Not thread-safe: one thread of a rank drives its Bootstrap. Move-only; the destructor
// finalizes the PMIx client.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"

namespace dltune::comm {

// The job-level keys under which the local launcher publishes the job's Plan (JSON,
// recipes/plan.h) and the recipe as run (YAML text, data paths absolute).
inline constexpr std::string_view kPlanKey = "dltune.plan";
inline constexpr std::string_view kRecipeKey = "dltune.recipe";

class Bootstrap {
 public:
  // Connects to the PMIx server that started this process and reads this rank's identity.
  // Success: a Bootstrap for this rank (or rank 0 of 1 when no server is present).
  // Failure: kPeerFailed when the environment names a server that cannot be reached or
  // does not answer; kInternal when PMIx returns malformed job data. No side effects on
  // failure (the PMIx client is finalized again).
  static Result<Bootstrap> init();

  Bootstrap(Bootstrap&&) noexcept;
  Bootstrap& operator=(Bootstrap&&) noexcept;
  ~Bootstrap();

  int rank() const;        // 0 .. size()-1
  int size() const;        // ranks in the job
  int local_rank() const;  // 0 .. local_size()-1, among the ranks on this node
  int local_size() const;  // ranks on this node
  int node_index() const;  // 0 .. num_nodes()-1
  int num_nodes() const;
  const std::string& hostname() const;
  // The job's name (the PMIx namespace); "singleton" without a server.
  const std::string& job_id() const;
  // True when running as rank 0 of 1 without a PMIx server.
  bool is_singleton() const;

  // Publishes `bytes` (any content, may be empty) under `key` for the other ranks. Visible to
  // them after commit() and a fence(). Failure: kInvalidInput for an empty key or one longer
  // than 500 bytes; kInternal when PMIx rejects the value.
  Status put(std::string_view key, std::string_view bytes);
  // Pushes all put() values to the server. Failure: kInternal.
  Status commit();
  // Blocks until every rank of the job has called fence(), collecting every rank's committed
  // data. `timeout` 0 waits forever (the launcher stops the job if a peer dies).
  // Failure: kTimeout when the timeout elapsed; kPeerFailed when a peer was lost.
  Status fence(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // Reads the value `rank` published under `key` (after its commit and a fence).
  // Failure: kInvalidInput for a rank outside 0..size()-1; kNotFound when that rank published
  // no such key.
  Result<std::string> get(int rank, std::string_view key) const;

  // The plan the launcher gave this job: the job-level value kPlanKey (local launcher), else
  // the content of the file named by DLTUNE_PLAN (srun), else "" (no plan given).
  // Failure: kNotFound / kIo when DLTUNE_PLAN names a file that cannot be read.
  Result<std::string> plan_blob() const;
  // The recipe as run the launcher gave this job: the job-level value kRecipeKey, else the
  // content of the file named by DLTUNE_RECIPE, else "". Failure: as plan_blob().
  Result<std::string> recipe_blob() const;

  // Disconnects from the server (also done by the destructor). Idempotent.
  Status finalize();

  // The implementation interface (PMIx client or local singleton); internal.
  class Impl;

 private:
  explicit Bootstrap(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dltune::comm
