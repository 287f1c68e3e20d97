// The small-message shared-memory allreduce: one exchange, no barrier (the "flag in the data
// cache line" design of Open MPI's coll/sm, MVAPICH2's shmem collectives and NCCL's LL
// protocols).
//
// Every local rank owns two slots in the header of the communicator's persistent staging
// segment (pre-faulted at creation). A slot is an 8-byte tag, (sequence << 24) | message
// bytes, followed by the data, so that a message of up to 56 bytes and its tag share one
// cache line. A call:
//   1. takes the next sequence number s (every rank counts the same calls), copies its input
//      into its slot of parity s & 1 and then stores the tag of s (release order);
//   2. polls every peer's tag until it shows s (acquire: the peer's data is then visible; a
//      tag of s with other bytes means the ranks passed different counts);
//   3. reduces all slots in rank order straight into recv (comm/reduce.h), so every rank
//      computes the same bitwise result.
// Why two slots are enough: a rank writes its slot of parity s & 1 again only in call s + 2,
// which it enters after seeing every peer's tag of call s + 1, which each peer wrote after it
// finished reading the slots of call s.
// Why one tag per slot and not one per line (NCCL's LL): measured here, a reader polling
// every line while the writer is still filling them pulls each line back and forth, one
// core-to-core transfer (~150 ns in a slow phase) per line: 3.5 us at 1 KiB against 0.6 us
// at 4 B. Polling one word and then reading the lines in bulk lets the CPU fetch them in
// parallel.
// Cost for L ranks and N bytes: each rank reads (L - 1) N bytes across cores, the barrier path
// (L - 1) N / L; hence the size limits in comm/algorithms.h.
#include <atomic>
#include <cstring>
#include <string>

#include "comm/algorithms.h"
#include "comm/reduce.h"
#include "comm/shm_segment.h"
#include "comm/spin_wait.h"

namespace dltune::comm::detail {
namespace {

constexpr size_t kTagBytes = 8;
constexpr unsigned kBytesBits = 24;
static_assert(kShmSmallMaxBytes + kTagBytes <= SharedSegment::kSmallSlotLines * 64,
              "the small-message threshold exceeds the shared slots");
static_assert(kShmSmallMaxBytes < (size_t{1} << kBytesBits), "message bytes must fit the tag");
static_assert(kShmSmallSharedMaxBytes <= kShmSmallMaxBytes, "see shm() in algo_shm.cc");

std::atomic_ref<uint64_t> tag_of(uint8_t* slot) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(slot));
}

// Waits until local rank k's slot carries `tag`.
Status await_slot(uint8_t* slot, uint64_t tag, int k, const Call& c, SpinWait& spin) {
  for (;;) {
    const uint64_t t = tag_of(slot).load(std::memory_order_acquire);
    if (t == tag) return ok_status();
    if (t >> kBytesBits == tag >> kBytesBits) {
      const size_t theirs = (t & ((uint64_t{1} << kBytesBits) - 1)) / c.esize;
      return invalid_input("local rank " + std::to_string(k) + " passed " + std::to_string(theirs) +
                           " elements, this rank passed " + std::to_string(c.count) +
                           ": do all ranks pass the same count?");
    }
    if (!spin.wait(c.deadline)) {
      return timeout_error("local rank " + std::to_string(k) +
                           " did not reach the small-message shared-memory allreduce in time "
                           "(call " +
                           std::to_string(tag >> kBytesBits) + " on this segment)");
    }
  }
}

}  // namespace

Status shm_small(const Call& c) {
  const size_t bytes = c.count * c.esize;
  DLTUNE_CHECK(bytes <= kShmSmallMaxBytes, "shm_small called with a large message");
  if (c.comm.size() == 1) {  // kShm runs on one node: size() is the local size
    copy_if_needed(c);
    return ok_status();
  }
  auto staging = c.comm.staging_segment(0);
  if (!staging) return staging.error();
  SharedSegment& seg = **staging;
  const int n = seg.local_size();
  const int me = seg.local_rank();
  const uint64_t seq = seg.next_small_sequence();
  const uint64_t tag = seq << kBytesBits | bytes;
  uint8_t* mine = seg.small_slot(me, seq);
  std::memcpy(mine + kTagBytes, c.send, bytes);
  tag_of(mine).store(tag, std::memory_order_release);

  SpinWait spin(n);
  const void* srcs[64];
  DLTUNE_CHECK(n <= 64, "shared-memory allreduce supports at most 64 local ranks");
  for (int k = 0; k < n; ++k) {
    uint8_t* slot = seg.small_slot(k, seq);
    if (k != me) DLTUNE_TRY(await_slot(slot, tag, k, c, spin));
    srcs[k] = slot + kTagBytes;
  }
  reduce_many(c.type, c.op, c.recv, srcs, n, c.count);
  return ok_status();
}

}  // namespace dltune::comm::detail
