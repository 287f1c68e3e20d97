// The node-local shared-memory allreduce, co-designed with the engine: buffers live in a
// node-shared segment (Communicator::alloc_shared), one region per local rank at the same
// offset. After a barrier, local rank k reduces its slice of the vector straight from every
// rank's region (reading each element once from each of the L regions), and writes the result
// back into every region; a second barrier ends the call. Each element is read L times and
// written L times in total: 4N bytes of memory traffic for 2 ranks, against ~11N for a ring
// over MPI point-to-point (copy in, CMA copy, reduce, copy out).
//
// Slices are cut on 64-byte boundaries so that no two ranks write the same cache line.
// Buffers outside shared memory are staged through the communicator's persistent staging
// segment (copy in, reduce in place, copy out), except registered ones, which cma() reduces in
// place. Small messages take the single-exchange path
// of comm/algo_shm_small.cc instead (no barrier; thresholds in comm/algorithms.h). As for the
// in-place path, every rank must pass the same kind of buffer (all in shared memory or none).
#include <algorithm>
#include <cstring>

#include "comm/algorithms.h"
#include "comm/reduce.h"
#include "comm/shm_segment.h"

namespace dltune::comm::detail {
namespace {

constexpr size_t kBlockBytes = 8192;  // the accumulator stays in L1

Status shm_in_place(SharedSegment& seg, size_t offset, const Call& c) {
  DLTUNE_TRY(shm_enter(seg, c));
  const auto [lo, hi] = shm_slice(c.count, c.esize, seg.local_size(), seg.local_rank());
  shm_reduce_slice(seg, offset, c, lo, hi, /*to_all=*/true);
  return seg.barrier(c.deadline);
}

}  // namespace

Status shm_enter(SharedSegment& seg, const Call& c) {
  const int n = seg.local_size();
  const int me = seg.local_rank();
  seg.publish(c.count);
  DLTUNE_TRY(seg.barrier(c.deadline));
  for (int k = 0; k < n; ++k) {
    if (seg.published(k) != c.count) {
      return invalid_input("local rank " + std::to_string(k) + " passed " +
                           std::to_string(seg.published(k)) + " elements, local rank " +
                           std::to_string(me) + " passed " + std::to_string(c.count) +
                           ": do all ranks pass the same count?");
    }
  }
  return ok_status();
}

std::pair<size_t, size_t> shm_slice(size_t count, size_t esize, int parts, int k) {
  const size_t per_line = std::max<size_t>(1, 64 / esize);
  const size_t lines = (count + per_line - 1) / per_line;
  const auto p = static_cast<size_t>(parts), i = static_cast<size_t>(k);
  return {std::min(count, block_begin(lines, p, i) * per_line),
          std::min(count, block_begin(lines, p, i + 1) * per_line)};
}

void shm_reduce_slice(SharedSegment& seg, size_t offset, const Call& c, size_t lo, size_t hi,
                      bool to_all) {
  const int n = seg.local_size();
  const size_t block = kBlockBytes / c.esize;
  alignas(64) unsigned char acc[kBlockBytes];
  const void* srcs[64];
  DLTUNE_CHECK(n <= 64, "shared-memory allreduce supports at most 64 local ranks");
  for (size_t b = lo; b < hi; b += block) {
    const size_t m = std::min(block, hi - b);
    const size_t at = offset + b * c.esize;
    for (int k = 0; k < n; ++k) srcs[k] = seg.region(k) + at;
    reduce_many(c.type, c.op, acc, srcs, n, m);
    if (to_all) {
      for (int k = 0; k < n; ++k) std::memcpy(seg.region(k) + at, acc, m * c.esize);
    } else {
      std::memcpy(seg.region(seg.local_rank()) + at, acc, m * c.esize);
    }
  }
}

Status shm(const Call& c) {
  const size_t bytes = c.count * c.esize;
  if (bytes <= kShmSmallSharedMaxBytes) return shm_small(c);
  if (c.send == c.recv) {
    if (auto span = c.comm.find_shared(c.recv, bytes)) {
      return shm_in_place(*span->segment, span->offset, c);
    }
  }
  // Registered private buffers (comm/registration.h): cma reads and writes them in place,
  // where staging would copy them through node-shared memory (what registered gradients stand
  // in for when /dev/shm is short).
  if (bytes >= kCmaMinBytes && c.comm.find_registration(c.send, bytes) &&
      (c.send == c.recv || c.comm.find_registration(c.recv, bytes))) {
    return cma(c);
  }
  if (bytes <= kShmSmallMaxBytes) return shm_small(c);
  auto staging = c.comm.staging_segment(bytes);
  if (!staging) return staging.error();
  SharedSegment& seg = **staging;
  uint8_t* mine = seg.region(seg.local_rank());
  std::memcpy(mine, c.send, bytes);
  DLTUNE_TRY(shm_in_place(seg, 0, c));
  std::memcpy(c.recv, mine, bytes);
  return ok_status();
}

}  // namespace dltune::comm::detail
