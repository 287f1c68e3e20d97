// SharedSegment: one POSIX shared-memory segment mapped by every rank of a node-local group,
// holding a control header (a barrier, one published word per rank, and the small-message
// slots) and one data region of the same size per local rank. Used by alloc_shared() and the
// shared-memory allreduce.
//
// Layout:  [header: control line of rank 0 .. L-1 (published words, barrier epoch) |
//                   small slots: rank 0 parity 0, rank 0 parity 1, rank 1 parity 0, ...]
//          [region 0][region 1]...[region L-1]     (each page-aligned, `stride` bytes apart)
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "common/result.h"

namespace dltune::comm {

class SharedSegment {
 public:
  // Collective over `local` (every rank of it calls it with the same bytes_per_rank): local
  // rank 0 creates and sizes the segment, sends its name to the others, which map it; the name
  // is unlinked once everyone has it, so nothing is left in /dev/shm even if a rank dies later.
  // A name left taken by a killed process of the same pid is skipped, never removed.
  // Regions are zero-filled and pre-faulted (MAP_POPULATE).
  // Errors: io_error naming the segment and errno (shm_open/ftruncate/mmap); timeouts from the
  // name exchange.
  static Result<std::shared_ptr<SharedSegment>> create(Communicator& local, size_t bytes_per_rank,
                                                       Deadline deadline);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  // The name it had in /dev/shm ("/dltune-PID-N"; unlinked since), for messages and tests.
  const std::string& name() const { return name_; }
  int local_size() const { return local_size_; }
  int local_rank() const { return local_rank_; }
  size_t bytes_per_rank() const { return bytes_per_rank_; }
  // Local rank r's data region as mapped in this process.
  uint8_t* region(int r) const { return data_ + static_cast<size_t>(r) * stride_; }

  // Waits until every local rank reached the barrier (release/acquire: writes before it are
  // visible after it). Spins, then yields the core (ranks may outnumber cores).
  // Error: kTimeout at `deadline` ("local rank(s) did not reach the shared-memory barrier").
  Status barrier(Deadline deadline);
  // This rank's published words (e.g. its element count, so that peers can check agreement;
  // the cma allreduce's buffer addresses). Stores are relaxed: publish before a barrier, read
  // after it. Precondition: 0 <= word < kPublishedWords.
  static constexpr int kPublishedWords = 7;
  void publish(uint64_t value) { publish(0, value); }
  void publish(int word, uint64_t value);
  uint64_t published(int local_rank) const { return published(local_rank, 0); }
  uint64_t published(int local_rank, int word) const;

  // The small-message allreduce's slots (comm/algo_shm_small.cc): two per local rank, picked
  // by sequence parity, of kSmallSlotLines cache lines each, 64-byte aligned, zero at creation.
  static constexpr size_t kSmallSlotLines = 19;  // 1 KiB at 56 bytes per line (8-byte tags)
  uint8_t* small_slot(int local_rank, uint64_t parity) const {
    return small_ + (2 * static_cast<size_t>(local_rank) + (parity & 1)) * kSmallSlotLines * 64;
  }
  // This rank's next small-message sequence number: 1, 2, 3, ... (process-local; every local
  // rank counts the same calls, so the numbers agree).
  uint64_t next_small_sequence() { return ++small_seq_; }

 private:
  SharedSegment(uint8_t* map, size_t map_bytes, int local_size, int local_rank,
                size_t bytes_per_rank, size_t stride, size_t header);

  uint8_t* map_;
  size_t map_bytes_;
  int local_size_;
  int local_rank_;
  size_t bytes_per_rank_;
  size_t stride_;
  uint8_t* data_;
  uint8_t* small_;
  uint64_t small_seq_ = 0;
  uint64_t barrier_epoch_ = 0;  // barriers this rank entered on this segment
  std::string name_;
};

}  // namespace dltune::comm
