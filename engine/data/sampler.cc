#include "engine/data/sampler.h"

#include <numeric>
#include <string>

#include "engine/core/rng.h"

namespace dltune::engine {

Result<Sampler> Sampler::create(int64_t dataset_size, int global_batch, int ranks, int rank,
                                uint64_t seed) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    return invalid_input("rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
                         " is not a valid rank");
  if (global_batch < ranks)
    return invalid_input("global batch " + std::to_string(global_batch) +
                         " is smaller than the number of ranks " + std::to_string(ranks) +
                         ": every rank needs at least one sample");
  if (global_batch > dataset_size)
    return invalid_input("global batch " + std::to_string(global_batch) +
                         " is larger than the dataset (" + std::to_string(dataset_size) +
                         " samples)");
  Sampler s;
  s.n_ = dataset_size;
  s.global_batch_ = global_batch;
  s.ranks_ = ranks;
  s.rank_ = rank;
  s.seed_ = seed;
  s.steps_per_epoch_ = dataset_size / global_batch;
  return s;
}

int Sampler::offset(int r) const {
  const int base = global_batch_ / ranks_, extra = global_batch_ % ranks_;
  return r * base + (r < extra ? r : extra);
}

void Sampler::shuffle_for(int64_t epoch) {
  if (perm_epoch_ == epoch) return;
  perm_.resize(static_cast<size_t>(n_));
  std::iota(perm_.begin(), perm_.end(), int64_t{0});
  Rng rng(Rng::mix(seed_, static_cast<uint64_t>(epoch)));
  for (int64_t i = n_ - 1; i > 0; --i) std::swap(perm_[i], perm_[rng.below(i + 1)]);
  perm_epoch_ = epoch;
}

void Sampler::indices(int64_t step, std::vector<int64_t>& out) {
  shuffle_for(epoch_of(step));
  const int64_t base = (step % steps_per_epoch_) * global_batch_ + offset(rank_);
  out.assign(perm_.begin() + base, perm_.begin() + base + local_count());
}

void Sampler::global_indices(int64_t step, std::vector<int64_t>& out) {
  shuffle_for(epoch_of(step));
  const int64_t base = (step % steps_per_epoch_) * global_batch_;
  out.assign(perm_.begin() + base, perm_.begin() + base + global_batch_);
}

}  // namespace dltune::engine
