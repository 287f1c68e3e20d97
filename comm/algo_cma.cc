// The single-copy allreduce on the ranks' own buffers: cross-memory attach (comm/cma.h)
// between the processes of one node, as Open MPI's shared-memory transport copies large
// messages, in one fused pass.
//
// The vector is cut into L slices on 64-byte lines (L local ranks); local rank k owns slice k.
// After a barrier at which every rank published its count and its send and receive addresses
// (words of the staging segment's control line), rank k walks its slice block by block:
//   (1) it reads block b of every peer's send buffer with process_vm_readv into a small
//       scratch (the block stays in cache) and reduces them, in rank order, with its own block
//       into its own receive buffer;
//   (2) it writes the reduced block from its receive buffer (still in cache) into every
//       peer's receive buffer with process_vm_writev.
// A second barrier ends the call: every slice has then reached every rank. So the reduce-
// scatter and the allgather are one pass, and every byte crosses between processes once, by
// the kernel's copy, with no staging copy in and out of shared memory. Traffic per rank for
// 2 ranks and N bytes: read its own half and the peer's (N), write its half of its own
// receive buffer and of the peer's (N): about 4-5N for the node with write-allocates, against
// ~8N for 'shm' on private buffers (copy in, reduce, copy out) and ~7-11N for a ring over MPI.
//
// Why this is safe in place and out of place: between the barriers, block b of slice k is
// read (send buffers) and written (receive buffers) only by rank k, and every rank reads all
// sources of a block before it writes that block anywhere; with send == recv the rank's own
// source is read before its receive block is written (see reduce_block()).
// Each element is reduced in one place (its slice's owner) and then copied, so every rank
// gets the same bits.
//
// Where the kernel refuses cross-memory attach (the probe of comm/cma.h, once per node-local
// group), the call runs 'shm' instead: the same result through node-shared staging. So do
// messages below kCmaMinBytes (comm/algorithms.h), where the system calls cost more than the
// staging copies.
#include <algorithm>
#include <cstring>
#include <string>

#include "comm/algorithms.h"
#include "comm/cma.h"
#include "comm/reduce.h"
#include "comm/shm_segment.h"

namespace dltune::comm::detail {
namespace {

// The staging segment's published words of a cma call.
constexpr int kWordCount = 0;  // as shm_enter() publishes it
constexpr int kWordSend = 1;
constexpr int kWordRecv = 2;
// Set (and left set: the communicator is unusable after an error) by a rank whose copies
// failed, before the closing barrier, so that every rank returns an error instead of some
// ranks returning a vector that misses that rank's slice.
constexpr int kWordFailed = 3;

struct Peers {
  const pid_t* pids;
  uint64_t send[64];
  uint64_t recv[64];
};

// Reduces block [b, b + m) over every local rank's send buffer, in rank order, into this
// rank's receive buffer. `acc` and `in` are scratch blocks of m elements. The first source
// goes into acc (a peer's is read straight there), later ones into `in`; the last reduction
// writes recv, after which nothing of this rank's send block is read again (in place: recv is
// send, and the last reduction may read and write it at once, which reduce() allows).
Status reduce_block(const Call& c, const Peers& p, int n, int me, size_t b, size_t m, uint8_t* acc,
                    uint8_t* in) {
  const size_t at = b * c.esize, len = m * c.esize;
  auto source = [&](int k, uint8_t* into) -> Result<const uint8_t*> {
    if (k == me) return c.send_at(b);
    DLTUNE_TRY_CTX(cma::read(p.pids[k], into, reinterpret_cast<const void*>(p.send[k] + at), len),
                   "reading local rank " + std::to_string(k) + "'s send buffer");
    return static_cast<const uint8_t*>(into);
  };
  auto first = source(0, acc);
  if (!first) return first.error();
  const uint8_t* sum = *first;
  for (int k = 1; k < n; ++k) {
    auto next = source(k, in);
    if (!next) return next.error();
    uint8_t* dst = k == n - 1 ? c.recv_at(b) : acc;
    reduce(c.type, c.op, dst, sum, *next, m);
    sum = dst;
  }
  return ok_status();
}

// Writes block [b, b + m) of this rank's receive buffer into every peer's, starting with the
// next rank (so that with more than two ranks the writers spread over the peers).
Status push_block(const Call& c, const Peers& p, int n, int me, size_t b, size_t m) {
  const size_t at = b * c.esize, len = m * c.esize;
  for (int s = 1; s < n; ++s) {
    const int k = (me + s) % n;
    DLTUNE_TRY_CTX(
        cma::write(p.pids[k], reinterpret_cast<void*>(p.recv[k] + at), c.recv_at(b), len),
        "writing local rank " + std::to_string(k) + "'s receive buffer");
  }
  return ok_status();
}

}  // namespace

Status cma(const Call& c) {
  if (c.comm.size() == 1) {
    copy_if_needed(c);
    return ok_status();
  }
  DLTUNE_CHECK(c.comm.node_count() == 1, "the cma allreduce runs within one node");
  auto peers = c.comm.cma_peers(c.deadline);
  if (!peers) return peers.error();
  if (!(*peers)->usable || c.count * c.esize < kCmaMinBytes) return shm(c);
  auto staging = c.comm.staging_segment(0);
  if (!staging) return staging.error();
  SharedSegment& seg = **staging;
  const int n = seg.local_size(), me = seg.local_rank();
  DLTUNE_CHECK(n <= 64, "the cma allreduce supports at most 64 local ranks");
  seg.publish(kWordSend, reinterpret_cast<uint64_t>(c.send));
  seg.publish(kWordRecv, reinterpret_cast<uint64_t>(c.recv));
  DLTUNE_TRY(shm_enter(seg, c));  // publishes the count (word 0) and waits for every rank
  static_assert(kWordCount == 0, "shm_enter() publishes the count as word 0");
  Peers p{(*peers)->pids.data(), {}, {}};
  for (int k = 0; k < n; ++k) {
    p.send[k] = seg.published(k, kWordSend);
    p.recv[k] = seg.published(k, kWordRecv);
  }
  const auto [lo, hi] = shm_slice(c.count, c.esize, n, me);
  const size_t block = std::max<size_t>(1, kCmaBlockBytes / c.esize);
  auto* acc = static_cast<uint8_t*>(c.comm.scratch(Communicator::kScratchCma, 2 * kCmaBlockBytes));
  uint8_t* in = acc + kCmaBlockBytes;
  Status copied;
  for (size_t b = lo; b < hi && copied; b += block) {
    const size_t m = std::min(block, hi - b);
    copied = reduce_block(c, p, n, me, b, m, acc, in);
    if (copied) copied = push_block(c, p, n, me, b, m);
  }
  if (!copied) seg.publish(kWordFailed, 1);
  DLTUNE_TRY(seg.barrier(c.deadline));
  if (!copied) return copied;
  for (int k = 0; k < n; ++k) {
    if (seg.published(k, kWordFailed) != 0) {
      return peer_failed("local rank " + std::to_string(k) +
                         " could not copy its slice to the other ranks (see its error)");
    }
  }
  return ok_status();
}

}  // namespace dltune::comm::detail
