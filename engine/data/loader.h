// BatchLoader: the batches of the coming steps read ahead of the trainer, on loader threads.
//
// How it works: the loader holds `depth` batch slots. Slot k holds step s + k's batch (this
// rank's samples of it: Sampler::indices, a pure function of the step), each sample a task on
// a queue that `threads` loader threads take from. next(s) waits for step s's slot to be
// complete, copies it out and gives the slot step s + depth, so the queue always holds the next
// `depth` steps' samples while the trainer computes (a bounded prefetch: depth batches of
// memory). A step asked out of order (a resumed run, a trial started again) drops what was
// queued and starts over there.
//
// Determinism: every sample is read with the seed mix(mix(seed, epoch), index), whichever
// thread reads it and whenever, and lands at its own place in its batch: the batches are the
// same for any number of threads (and depend only on the seed, the sampler and the step).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/result.h"
#include "engine/data/dataset.h"
#include "engine/data/sampler.h"

namespace dltune::engine {

struct LoaderOptions {
  int threads = 2;  // loader threads (>= 1)
  int depth = 2;    // batches read ahead (>= 1)
  uint64_t seed = 1;
  bool inputs = true, labels = true;  // which parts of the samples the caller needs
  int64_t end_step = INT64_MAX;       // no batch is read ahead for steps from here on
};

// The seed of sample `index` in `epoch` (its augmentation's draws).
uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index);

class BatchLoader {
 public:
  // `data` must be read on demand (data.reader set) and outlive the loader; `sampler` is copied.
  // Reading starts with the first next().
  BatchLoader(const Dataset& data, const Sampler& sampler, LoaderOptions options);
  ~BatchLoader();  // stops the threads (after their current sample)
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // This rank's batch of `step` into x (B, sample) and y (B, label_width) (B =
  // sampler.local_count(); either pointer null when options said so), waiting for it if it is
  // not complete. Errors: a sample that could not be read (the reader's error, with the step).
  Status next(int64_t step, float* x, int32_t* y);
  // Samples [first, first + count) of `data` (any dataset read on demand: the held-out set),
  // read now by the loader threads with seed 0. x or y may be null.
  Status read(const Dataset& data, int64_t first, int count, float* x, int32_t* y);
  // Drops the batches read ahead and frees their memory (the recipe tuner's idle trainers);
  // the next next() starts over.
  void release();
  // Seconds next() spent waiting for batches in all, and in the last call.
  double wait_seconds() const { return waited_; }
  double last_wait_seconds() const { return last_wait_; }

 private:
  struct Slot {
    int64_t step = -1;
    std::vector<float> x;
    std::vector<int32_t> y;
    int pending = 0;      // samples not yet read
    bool filled = false;  // its samples were queued (steps from end_step on wait for next())
    Status error;
  };
  struct Task {
    Slot* slot;
    const SampleReader* reader;
    int64_t index;
    uint64_t seed;
    float* x;
    int32_t* y;
  };
  void work();
  // Gives `slot` step `step` and queues its samples, unless the step is past end_step and not
  // wanted `now` (under mu_).
  void fill(Slot& slot, int64_t step, bool now = false);
  // Drops the queued tasks and waits for the running ones (under `lock`).
  void drain(std::unique_lock<std::mutex>& lock);

  const Dataset& data_;
  Sampler sampler_;
  LoaderOptions o_;
  int64_t sample_numel_ = 0, label_width_ = 0;
  std::vector<Slot> slots_;
  std::vector<int64_t> indices_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Task> tasks_;
  int running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
  double waited_ = 0, last_wait_ = 0;
};

}  // namespace dltune::engine
