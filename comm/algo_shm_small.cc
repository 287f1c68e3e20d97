// The small-message shared-memory allreduce: one exchange, no barrier (the "flag in the data
// cache line" design of Open MPI's coll/sm, MVAPICH2's shmem collectives and NCCL's LL
// protocols).
//
// Every local rank owns two slots in the header of the communicator's persistent staging
// segment (pre-faulted at creation), picked by sequence parity. A slot is a run of tagged cache
// lines (comm/shm_lines.h: an 8-byte tag, (sequence << 24) | message bytes, then 56 bytes of
// the message; NCCL's LL128 layout on a CPU cache line). A call:
//   1. takes the next sequence number s (every rank counts the same calls) and writes its
//      input into its slot of parity s & 1, each line's data before that line's tag (release
//      order);
//   2. for every peer, in rank order and line by line, polls the line's tag until it shows s
//      (acquire: the line's data is then visible; a tag of s with other bytes means the ranks
//      passed different counts) and copies the line's data into a contiguous per-rank block of
//      the communicator's scratch memory;
//   3. reduces the blocks in rank order into recv (comm/reduce.h), so every rank computes the
//      same bitwise result.
// Why a tag on every line: with one tag ahead of the data, a reader learns that the data is
// there only after one core-to-core transfer (the tag's line) and then fetches the other lines
// in a second one. With a tag per line, the lines a reader polls carry the data themselves.
// Measured with 2 MPI ranks in bench/allreduce (interleaved, f32 sum), with CLDEMOTE and the
// constant-size copies of shm_lines.h: 0.19-0.20 against 0.27 us at 4-32 B, 0.22-0.23 against
// 0.34-0.36 us at 64 B, 0.25-0.26 against 0.40-0.46 us at 256 B, 0.31-0.32 against 0.41-0.46
// us at 512 B (before: one tag ahead of contiguous data). Polling line by line in the writer's
// order keeps a reader from pulling lines the writer has not reached yet (each such line would
// bounce between the two cores). bench/allreduce's xchg column measures these transfers with
// nothing else around them; the whole call costs 1.0-1.6x that (session 9: 0.16-0.17 us at
// 4-32 B, 0.30-0.31 at 512 B, 0.42-0.45 at 1 KiB), so what remains is core-to-core traffic.
// Why two slots are enough: a rank writes its slot of parity s & 1 again only in call s + 2,
// which it enters after seeing every peer's tags of call s + 1, which each peer wrote after it
// finished reading the slots of call s.
// Cost for L ranks and N bytes: each rank reads (L - 1) N bytes across cores, the barrier path
// (L - 1) N / L; hence the size limits in comm/algorithms.h.
#include <cstring>
#include <string>

#include "comm/algorithms.h"
#include "comm/reduce.h"
#include "comm/shm_lines.h"
#include "comm/shm_segment.h"
#include "comm/spin_wait.h"

namespace dltune::comm::detail {
namespace {

using shm_lines::kLineData;
static_assert(kShmSmallMaxBytes <= SharedSegment::kSmallSlotLines * kLineData,
              "the small-message threshold exceeds the shared slots");
static_assert(kShmSmallMaxBytes <= shm_lines::kMaxMessageBytes, "message bytes must fit the tag");
static_assert(kShmSmallSharedMaxBytes <= kShmSmallMaxBytes, "see shm() in algo_shm.cc");

// Waits until `line` of local rank k's slot carries `tag`.
Status await_line(uint8_t* line, uint64_t tag, int k, const Call& c, SpinWait& spin) {
  uint64_t seen = 0;
  switch (shm_lines::await(line, tag, c.deadline, spin, &seen)) {
    case shm_lines::Wait::kReady:
      return ok_status();
    case shm_lines::Wait::kOtherBytes:
      return invalid_input("local rank " + std::to_string(k) + " passed " +
                           std::to_string(shm_lines::tag_bytes(seen) / c.esize) +
                           " elements, this rank passed " + std::to_string(c.count) +
                           ": do all ranks pass the same count?");
    case shm_lines::Wait::kTimeout:
      break;
  }
  return timeout_error("local rank " + std::to_string(k) +
                       " did not reach the small-message shared-memory allreduce in time "
                       "(call " +
                       std::to_string(shm_lines::tag_sequence(tag)) + " on this segment)");
}

}  // namespace

Status shm_small(const Call& c) {
  const size_t bytes = c.count * c.esize;
  DLTUNE_CHECK(bytes <= kShmSmallMaxBytes, "shm_small called with a large message");
  if (bytes == 0) return ok_status();
  if (c.comm.size() == 1) {  // kShm runs on one node: size() is the local size
    copy_if_needed(c);
    return ok_status();
  }
  auto staging = c.comm.staging_segment(0);
  if (!staging) return staging.error();
  SharedSegment& seg = **staging;
  const int n = seg.local_size();
  const int me = seg.local_rank();
  DLTUNE_CHECK(n <= 64, "shared-memory allreduce supports at most 64 local ranks");
  const uint64_t seq = seg.next_small_sequence();
  const uint64_t tag = shm_lines::make_tag(seq, bytes);
  const size_t lines = shm_lines::lines_for(bytes);
  const auto* in = static_cast<const uint8_t*>(c.send);
  shm_lines::write(seg.small_slot(me, seq), in, bytes, tag);

  // Rank k's data, contiguous, at blocks + k * stride (this rank's own straight from c.send,
  // which may be c.recv).
  // Blocks of whole lines, so that every line is copied with a constant size (inlined moves).
  // A variable-size copy of the last line cost 0.07 us at 16-32 B (0.27 against 0.20 us) and
  // 0.03-0.05 us at 64 B-1 KiB, measured with 2 ranks.
  const size_t stride = lines * kLineData;
  auto* blocks = static_cast<uint8_t*>(c.comm.scratch(Communicator::kScratchSmallShm, n * stride));
  SpinWait spin(n);
  const void* srcs[64];
  for (int k = 0; k < n; ++k) {
    uint8_t* out = blocks + static_cast<size_t>(k) * stride;
    srcs[k] = out;
    if (k == me) {
      std::memcpy(out, in, bytes);
      continue;
    }
    uint8_t* slot = seg.small_slot(k, seq);
    for (size_t l = 0; l < lines; ++l) {
      DLTUNE_TRY(await_line(slot + l * shm_lines::kLineBytes, tag, k, c, spin));
      shm_lines::copy_line(out + l * kLineData, slot, l);
    }
  }
  reduce_many(c.type, c.op, c.recv, srcs, n, c.count);
  return ok_status();
}

}  // namespace dltune::comm::detail
