// A trainer's own memory, measured: a baseline taken just before the trainer is built (with
// the data loaded), then its peak above that baseline. What the worker reports beside the
// memory model's estimate after a training run, and the trial search after each trainer's
// warm-up.
#pragma once

#include <cstdint>

#include "engine/train/trainer.h"

namespace dltune::engine {

class MemoryBaseline {
 public:
  // Restarts the resident high-water mark (rss::restart_peak()) and the engine's device peak
  // (gpu::reset_device_peak()). With `trim`, first returns freed heap pages to the system
  // (glibc's malloc_trim), so that a trainer freed earlier in the process cannot lend its
  // resident pages to the next one unseen.
  static MemoryBaseline take(bool trim);

  // `trainer`'s peak since take(), in bytes: on the GPU the engine's device peak; else the
  // resident peak above the baseline, less the node-shared gradient pages of its peers that
  // this rank maps (theirs: its own share is in its estimate). -1 when the resident
  // high-water mark could not be restarted (nothing is measured).
  int64_t peak_bytes(const Trainer& trainer) const;

 private:
  bool restarted_ = false;
  int64_t rss_ = 0, shmem_ = 0;
};

}  // namespace dltune::engine
