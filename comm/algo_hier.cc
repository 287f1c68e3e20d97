// The two-level hierarchical allreduce (S-Caffe / MVAPICH2), in two forms.
//
// Multi-leader, when every node holds the same number L > 1 of the communicator's ranks (so
// Communicator::rail() exists) and the node-local algorithm is kShm (the default): the vector
// is cut into L slices on 64-byte lines, local rank k owning slice k.
//   (1) In a node-shared segment (the caller's SharedBuffer, else the staging segment), local
//       rank k reduces slice k over every local rank's copy into its own region: a
//       reduce-scatter in shared memory, each element read once from each region.
//   (2) Rail k (local rank k of every node) runs the flat algorithm among nodes (outer) on
//       slice k. All L ranks of a node drive the network at once, each with 1/L of the bytes.
//   (3) Local rank k writes its final slice into every local rank's region, and after a
//       barrier each rank copies its region out: an allgather in shared memory.
// Inter-node traffic is one vector per node, as with one leader, but no rank idles while the
// leaders work and the node-local phases move half the bytes of a node-local allreduce plus a
// broadcast. Measured on 4 simulated nodes x 2 ranks (bench/predict/README.md), 16 MiB: at
// 10 Gbit/s 88 ms against the best flat ring's 102 (ahead from 4 MiB); at 1 Gbit/s, where the
// ring already runs at 94 % of the link, 259-268 ms against 248-250, as the single-leader
// form's 270 (the two shared cores, not the links, decide there).
// No two ranks write the same bytes between barriers: in (1) rank k reads slice k of every
// region and writes it in its own; in (3) it writes slice k, which only it reads, into the
// others.
//
// Single leader, otherwise: (1) a node-local phase leaves the node's sum on local rank 0 (a
// binomial reduce for inner == kTree, otherwise a node-local allreduce with the inner
// algorithm); (2) the node leaders run the flat algorithm among themselves (outer); (3) each
// leader broadcasts the result to its node (binomial).
//
// Every element is reduced in one place at each level and then copied, so every rank ends with
// the same bits.
#include <cstring>
#include <memory>

#include "comm/algorithms.h"
#include "comm/shm_segment.h"

namespace dltune::comm::detail {
namespace {

Status multi_leader(const Call& c, Communicator& local, Communicator& rail) {
  const size_t bytes = c.count * c.esize;
  std::shared_ptr<SharedSegment> keep;  // the caller's segment, alive for the call
  SharedSegment* seg = nullptr;
  size_t offset = 0;
  if (c.send == c.recv) {
    if (auto span = local.find_shared(c.recv, bytes)) {
      keep = span->segment;
      seg = keep.get();
      offset = span->offset;
    }
  }
  const bool staged = seg == nullptr;
  if (staged) {
    auto staging = local.staging_segment(bytes);
    if (!staging) return staging.error();
    seg = *staging;
    std::memcpy(seg->region(seg->local_rank()), c.send, bytes);
  }
  const int me = seg->local_rank();
  DLTUNE_TRY_CTX(shm_enter(*seg, c), "node-local reduce-scatter");
  const auto [lo, hi] = shm_slice(c.count, c.esize, seg->local_size(), me);
  shm_reduce_slice(*seg, offset, c, lo, hi, /*to_all=*/false);
  uint8_t* slice = seg->region(me) + offset + lo * c.esize;
  if (hi > lo) {
    const Call across{rail, slice, slice, hi - lo, c.type, c.op, c.esize, c.deadline, c.options};
    DLTUNE_TRY_CTX(
        run_algorithm(c.options.outer, across),
        "'" + std::string(algorithm_name(c.options.outer)) + "' on rail " + std::to_string(me));
  }
  for (int k = 0; k < seg->local_size(); ++k) {
    if (k != me) std::memcpy(seg->region(k) + offset + lo * c.esize, slice, (hi - lo) * c.esize);
  }
  DLTUNE_TRY_CTX(seg->barrier(c.deadline), "node-local allgather");
  if (staged) std::memcpy(c.recv, seg->region(me), bytes);
  return ok_status();
}

}  // namespace

Status hierarchical(const Call& c) {
  Communicator& local = c.comm.local();
  if (Communicator* rail = c.comm.rail(); rail != nullptr && c.options.inner == Algorithm::kShm)
    return multi_leader(c, local, *rail);
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
