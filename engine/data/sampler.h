// Which samples each rank trains on at each step: per-epoch shuffles seeded by (seed, epoch),
// a global batch split over the ranks with remainders.
//
// Step s uses global batch number s % steps_per_epoch of epoch s / steps_per_epoch, i.e. the
// samples perm_e[j*G, (j+1)*G) (the last incomplete batch of an epoch is dropped). Rank r of P
// takes the contiguous slice [offset(r), offset(r) + count(r)) of that batch, where the first
// G % P ranks get one sample more. Everything is a pure function of (seed, step, rank), so the
// data order needs no state to checkpoint beyond the step.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"

namespace dltune::engine {

class Sampler {
 public:
  // Errors (invalid_input): global_batch < ranks, global_batch > dataset size, ranks < 1.
  static Result<Sampler> create(int64_t dataset_size, int global_batch, int ranks, int rank,
                                uint64_t seed);

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int global_batch() const { return global_batch_; }
  // Samples of rank `r` in every global batch (differs by at most 1 between ranks).
  int count(int r) const { return global_batch_ / ranks_ + (r < global_batch_ % ranks_ ? 1 : 0); }
  int offset(int r) const;
  int local_count() const { return count(rank_); }
  int64_t epoch_of(int64_t step) const { return step / steps_per_epoch_; }

  // This rank's sample indices for `step` (local_count() of them).
  void indices(int64_t step, std::vector<int64_t>& out);
  // The whole global batch of `step` (every rank's slices, in rank order).
  void global_indices(int64_t step, std::vector<int64_t>& out);

 private:
  void shuffle_for(int64_t epoch);

  int64_t n_ = 0, steps_per_epoch_ = 0;
  int global_batch_ = 0, ranks_ = 1, rank_ = 0;
  uint64_t seed_ = 0;
  int64_t perm_epoch_ = -1;
  std::vector<int64_t> perm_;
};

}  // namespace dltune::engine
