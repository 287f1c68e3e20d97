// Checkpoints written in the background (issue 40): training waits only while the state is
// copied, not while it is hashed and written.
//
// How it works: start() copies the parameters, optimizer slots and model state into a snapshot
// the writer owns (kept between checkpoints: one allocation for the run), then a thread writes
// the snapshot with save_checkpoint() (temporary file, fsync, rename) while training goes on. At
// most one write is in flight: a checkpoint that comes while the previous one is still being
// written waits for it first, so the snapshot is never overwritten under the thread, and a slow
// disk slows training down instead of queueing copies. A crash (or SIGKILL) during a write
// leaves the previous checkpoint whole: the rename is the only step that replaces it.
//
// Memory: the snapshot, snapshot_bytes(), the size of the checkpoint's payload, on the rank
// that writes (rank 0); planning's memory model counts it (planning/memory_model.h). A
// pipeline's checkpoint takes no snapshot (finish_in_background()).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "engine/io/checkpoint.h"
#include "engine/io/checkpoint_stream.h"

namespace dltune::engine {

class CheckpointWriter {
 public:
  CheckpointWriter() = default;
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  // Waits for the write in flight (its error is lost: call wait() to see it).
  ~CheckpointWriter();

  // Waits for the previous write, then copies `params`, `slots` and `state` and starts writing
  // them with `header` to `path` in the background. Errors: the previous write's (io_error
  // naming its path), and then nothing new is started.
  Status start(const std::string& path, const Checkpoint& header, std::span<const float> params,
               const std::vector<std::span<const float>>& slots, std::span<const float> state);

  // Finishes `stream` (CheckpointStream::finish(): with hash_at_finish, its hash; the header,
  // fsync and rename) in the background: a pipeline's rank 0, which never holds the whole model,
  // streams the stages' tensors into the file's page cache while training waits and leaves the
  // rest to this thread. The caller must have waited for the previous write (wait()): the
  // stream's temporary file is the same one. Errors: internal_error when a write is in flight.
  Status finish_in_background(std::unique_ptr<CheckpointStream> stream);

  // Waits for the write in flight, if any. Errors: that write's.
  Status wait();

  // Whether a write is in flight.
  bool busy() const { return thread_.joinable(); }

  // Bytes of the snapshot as the last start() sized it (0 before).
  int64_t snapshot_bytes() const;

  // Seconds the finished background writes took (hashing, writing, fsync, rename), and how many
  // writes were started.
  double write_s() const { return write_s_; }
  int64_t writes() const { return writes_; }

 private:
  std::vector<float> params_, state_;
  std::vector<std::vector<float>> slots_;
  std::thread thread_;
  Status result_;              // the thread's, read after join
  double thread_write_s_ = 0;  // the thread's, read after join
  double write_s_ = 0;
  int64_t writes_ = 0;
};

}  // namespace dltune::engine
