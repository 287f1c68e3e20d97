// The two-level hierarchical allreduce (S-Caffe / MVAPICH2): (1) a node-local phase leaves the
// node's sum on local rank 0 (a binomial reduce for inner == kTree, otherwise a node-local
// allreduce with the inner algorithm, kShm by default, which reduces in shared memory);
// (2) the node leaders run any flat algorithm among themselves (outer); (3) each leader
// broadcasts the result to its node (binomial). Inter-node traffic is one vector per node
// instead of one per rank.
#include "comm/algorithms.h"

namespace dltune::comm::detail {

Status hierarchical(const Call& c) {
  Communicator& local = c.comm.local();
  const Call in_node = c.on(local, c.send, c.recv);
  if (c.options.inner == Algorithm::kTree) {
    DLTUNE_TRY_CTX(tree_reduce(in_node), "node-local tree reduce");
  } else {
    DLTUNE_TRY_CTX(run_algorithm(c.options.inner, in_node),
                   "node-local '" + std::string(algorithm_name(c.options.inner)) + "' phase");
  }
  if (Communicator* leaders = c.comm.leaders(); leaders != nullptr && leaders->size() > 1) {
    DLTUNE_TRY_CTX(run_algorithm(c.options.outer, c.on(*leaders, c.recv, c.recv)),
                   "'" + std::string(algorithm_name(c.options.outer)) + "' among node leaders");
  }
  DLTUNE_TRY_CTX(binomial_broadcast(local, c.recv, c.count * c.esize, 0, kTagBcast, c.deadline),
                 "node-local broadcast");
  return ok_status();
}

}  // namespace dltune::comm::detail
