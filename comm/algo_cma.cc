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
// Registered buffers (comm/registration.h) skip the system calls: where every peer's send and
// receive buffers are registered, their whole pages are mapped here, and the part of the slice
// that lies in them is reduced straight from the peers' memory into every rank's receive
// buffer, block by L1-sized block, as 'shm' does in place (reduce_direct()); only the slice's
// ends in the buffers' partial first and last pages go through process_vm_readv / writev.
// Each element is still reduced once, left to right in rank order, on either path.
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
#include "comm/registration.h"
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
// The registration (its group id) holding the send and the receive buffer, 0 for none.
constexpr int kWordSendReg = 4;
constexpr int kWordRecvReg = 5;
// reduce_direct()'s block: the accumulator stays in L1.
constexpr size_t kDirectBlockBytes = 8192;

struct Peers {
  const pid_t* pids;
  uint64_t send[64];
  uint64_t recv[64];
  // Where registered: element 0 of local rank k's send / receive buffer as mapped here (valid
  // within the registration's shared pages only), else 0.
  uintptr_t send_map[64];
  uintptr_t recv_map[64];
};

// Narrows [*lo, *hi) to the elements of the buffer at `addr` on local rank k that lie in k's
// shared pages of registration `reg` (none when reg is null). Returns the buffer's element 0
// as mapped here (0 when reg is null).
uintptr_t clip_to_registration(const RegistrationState* reg, int k, uint64_t addr, size_t esize,
                               size_t* lo, size_t* hi) {
  const RegistrationState::Span* s = reg ? &reg->spans[static_cast<size_t>(k)] : nullptr;
  if (s == nullptr || s->bytes == 0 || s->base + s->bytes <= addr) {
    *hi = *lo;
    return 0;
  }
  const size_t first = addr >= s->base ? 0 : (s->base - addr + esize - 1) / esize;
  const size_t end = (s->base + s->bytes - addr) / esize;
  *lo = std::max(*lo, first);
  *hi = std::max(*lo, std::min(*hi, end));
  return reinterpret_cast<uintptr_t>(s->mapped) - s->base + addr;
}

// Reduces elements [lo, hi) (all inside every peer's shared pages) from every rank's send
// buffer into every rank's receive buffer, in L1-sized blocks.
void reduce_direct(const Call& c, const Peers& p, int n, int me, size_t lo, size_t hi) {
  alignas(64) unsigned char acc[kDirectBlockBytes];
  const void* srcs[64];
  const size_t block = std::max<size_t>(1, kDirectBlockBytes / c.esize);
  for (size_t b = lo; b < hi; b += block) {
    const size_t m = std::min(block, hi - b), at = b * c.esize;
    for (int k = 0; k < n; ++k) {
      srcs[k] = k == me ? c.send_at(b) : reinterpret_cast<const uint8_t*>(p.send_map[k] + at);
    }
    reduce_many(c.type, c.op, acc, srcs, n, m);
    for (int s = 0; s < n; ++s) {
      const int k = (me + s) % n;
      uint8_t* dst = k == me ? c.recv_at(b) : reinterpret_cast<uint8_t*>(p.recv_map[k] + at);
      std::memcpy(dst, acc, m * c.esize);
    }
  }
}

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
  const size_t bytes = c.count * c.esize;
  {
    const auto send_reg = c.comm.find_registration(c.send, bytes);
    const auto recv_reg = c.send == c.recv ? send_reg : c.comm.find_registration(c.recv, bytes);
    seg.publish(kWordSendReg, send_reg ? send_reg->id : 0);
    seg.publish(kWordRecvReg, recv_reg ? recv_reg->id : 0);
  }
  seg.publish(kWordSend, reinterpret_cast<uint64_t>(c.send));
  seg.publish(kWordRecv, reinterpret_cast<uint64_t>(c.recv));
  DLTUNE_TRY(shm_enter(seg, c));  // publishes the count (word 0) and waits for every rank
  static_assert(kWordCount == 0, "shm_enter() publishes the count as word 0");
  Peers p{(*peers)->pids.data(), {}, {}, {}, {}};
  const auto [lo, hi] = shm_slice(c.count, c.esize, n, me);
  // [dlo, dhi): the part of this rank's slice in every peer's registered pages.
  size_t dlo = lo, dhi = hi;
  std::shared_ptr<const RegistrationState> regs[2];  // held for the call
  for (int k = 0; k < n; ++k) {
    p.send[k] = seg.published(k, kWordSend);
    p.recv[k] = seg.published(k, kWordRecv);
    if (k == me) continue;
    for (int w = 0; w < 2; ++w) {
      const uint64_t id = seg.published(k, w == 0 ? kWordSendReg : kWordRecvReg);
      if (!regs[w] || regs[w]->id != id) regs[w] = id != 0 ? c.comm.registration(id) : nullptr;
      (w == 0 ? p.send_map : p.recv_map)[k] = clip_to_registration(
          regs[w].get(), k, w == 0 ? p.send[k] : p.recv[k], c.esize, &dlo, &dhi);
    }
  }
  if (dlo == dhi) dlo = dhi = hi;
  const size_t block = std::max<size_t>(1, kCmaBlockBytes / c.esize);
  auto* acc = static_cast<uint8_t*>(c.comm.scratch(Communicator::kScratchCma, 2 * kCmaBlockBytes));
  uint8_t* in = acc + kCmaBlockBytes;
  Status copied;
  auto through_kernel = [&](size_t from, size_t to) {
    for (size_t b = from; b < to && copied; b += block) {
      const size_t m = std::min(block, to - b);
      copied = reduce_block(c, p, n, me, b, m, acc, in);
      if (copied) copied = push_block(c, p, n, me, b, m);
    }
  };
  through_kernel(lo, dlo);
  if (copied) reduce_direct(c, p, n, me, dlo, dhi);
  through_kernel(dhi, hi);
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
