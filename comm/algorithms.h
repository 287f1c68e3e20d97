// Internal: the allreduce algorithms behind comm::allreduce(), one function each, sharing one
// call description. Not part of the public API (include comm/allreduce.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "comm/allreduce.h"
#include "comm/communicator.h"

namespace dltune::comm::detail {

// One allreduce call, validated by allreduce(): count > 0, buffers non-null.
struct Call {
  Communicator& comm;
  const void* send;  // == recv for in place
  void* recv;
  size_t count;
  DataType type;
  ReduceOp op;
  size_t esize;  // bytes per element
  Deadline deadline;
  const AllreduceOptions& options;

  const uint8_t* send_at(size_t elem) const {
    return static_cast<const uint8_t*>(send) + elem * esize;
  }
  uint8_t* recv_at(size_t elem) const { return static_cast<uint8_t*>(recv) + elem * esize; }
  // The same call on another communicator (sub-communicator phases of hierarchical).
  Call on(Communicator& c, const void* s, void* r) const {
    return Call{c, s, r, count, type, op, esize, deadline, options};
  }
};

// Tags of the collectives (kReservedTagBase + small offsets); every message of one algorithm
// uses its own tag so that a mismatch of algorithms across ranks shows as a timeout or size
// error, not as silent garbage.
inline constexpr int kTagRing = kReservedTagBase + 1;
inline constexpr int kTagRd = kReservedTagBase + 2;
inline constexpr int kTagRab = kReservedTagBase + 3;
inline constexpr int kTagTree = kReservedTagBase + 4;
inline constexpr int kTagBcast = kReservedTagBase + 5;
inline constexpr int kTagFold = kReservedTagBase + 6;

// Block b of `count` elements split into `parts` near-equal blocks: [begin, end).
inline size_t block_begin(size_t count, size_t parts, size_t b) {
  return count / parts * b + std::min(b, count % parts);
}

// Runs algorithm `a` (anything but kHierarchical's own validation) for the call.
Status run_algorithm(Algorithm a, const Call& c);

// Copies send to recv when the call is out of place.
void copy_if_needed(const Call& c);

Status ring(const Call& c);
Status recursive_doubling(const Call& c);
Status rabenseifner(const Call& c);
Status tree(const Call& c);
Status hierarchical(const Call& c);
Status shm(const Call& c);
// The single-copy allreduce through cross-memory attach (comm/algo_cma.cc); one node only.
// Runs shm() below kCmaMinBytes, and where the node's probe found cross-memory attach
// refused. Errors: as
// shm_enter(), the probe's, and kPeerFailed / io errors when a cross-memory copy fails (a
// buffer outside the peer's mappings, a peer gone).
Status cma(const Call& c);
// The block each cma rank reduces at a time: two of them (a peer's block and the running
// sum) stay in this CPU's L2 cache.
inline constexpr size_t kCmaBlockBytes = size_t{256} << 10;
// Messages below this many bytes take shm()'s paths in cma(): there the two system calls per
// peer and block cost more than the staging copies they save. Measured with 2 MPI ranks on
// private buffers, interleaved: cma 3.7-3.9 us at 4-64 B (shm 0.31-0.35), 6.5-8.8 us at
// 8-32 KiB (shm 3.6-6.3), 13.3 against 11.3 us at 64 KiB, 19.8 against 19.0 at 128 KiB.
inline constexpr size_t kCmaMinBytes = size_t{128} << 10;

// The largest messages (bytes) kShm reduces with the small-message path, shm_small(): one
// exchange through per-rank slots of tagged cache lines, no barrier. Each rank reads the whole
// vector of every peer, while the barrier path reads 1/L of it across cores, so the barrier
// path wins from some size on. Measured with 2 MPI ranks, interleaved, f32 sum in place: on
// buffers in a SharedBuffer (the barrier path needs no copies) the small path takes 0.36 us at
// 512 B and 0.47 us at 1 KiB against 0.62-0.69 us for the barrier path, and 0.92 against
// 0.62-0.70 us at 2 KiB; on private buffers (the barrier path stages through copies) it takes
// 0.48 us at 1 KiB and ties at 2 KiB (0.96 against 0.89-0.92 us).
inline constexpr size_t kShmSmallMaxBytes = 1024;        // private buffers
inline constexpr size_t kShmSmallSharedMaxBytes = 1024;  // in place in a SharedBuffer
// Precondition: c.count * c.esize <= kShmSmallMaxBytes. Errors: invalid input when ranks pass
// different counts, kTimeout when a local rank does not arrive by c.deadline, and the
// staging segment's allocation errors on the first call.
Status shm_small(const Call& c);

// The pieces of the shared-memory allreduce (comm/algo_shm.cc), also used by hierarchical's
// multi-leader form. `seg` holds one region per local rank, the vector at `offset` in each.
// shm_enter: publishes c.count and waits at the segment's barrier; errors: kTimeout at
// c.deadline, invalid input when the local ranks' counts differ.
Status shm_enter(SharedSegment& seg, const Call& c);
// Local rank k's slice [lo, hi) of `count` elements of `esize` bytes cut into `parts` near-equal
// slices on 64-byte boundaries (no two ranks write one cache line); empty slices are possible.
std::pair<size_t, size_t> shm_slice(size_t count, size_t esize, int parts, int k);
// Reduces elements [lo, hi) over every local rank's region and writes the result into every
// region (to_all) or only this rank's. Precondition: shm_enter() returned OK since the regions
// were last written.
void shm_reduce_slice(SharedSegment& seg, size_t offset, const Call& c, size_t lo, size_t hi,
                      bool to_all);

// Binomial reduce of the call to rank 0 (result in c.recv on rank 0 only; other ranks' recv
// is scratch afterwards).
Status tree_reduce(const Call& c);
Status binomial_broadcast(Communicator& comm, void* data, size_t bytes, int root, int tag,
                          Deadline deadline);
// Every rank's record of `bytes` bytes, in rank order: all[r * bytes ...] is rank r's (this
// rank's own copied from `mine`), from a ring of sendrecv steps, so no rank waits on a send.
// Collective; for the small exchanges of set-up (probes, registrations). Errors: those of
// sendrecv (timeouts, a peer gone).
Status ring_allgather(Communicator& comm, const void* mine, size_t bytes, void* all, int tag,
                      Deadline deadline);
Status chain_broadcast(Communicator& comm, void* data, size_t bytes, int root, size_t segment_bytes,
                       int tag, Deadline deadline);

}  // namespace dltune::comm::detail
