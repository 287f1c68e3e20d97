// Writing a checkpoint whose parts arrive piece by piece in file order, for a writer that never
// holds the whole model: a pipeline's rank 0 receives each stage's parameters, optimizer slots
// and state in turn and hands them to the file (engine/train/pipeline_io.cc).
//
// The file is the format of checkpoint.h, readable by load_checkpoint(): its metadata line
// (which carries the payload's sha256, known only at the end) is padded with spaces to a fixed
// 4 KiB header, so the payload can be written first, from offset 4096, and the header last.
// The file is a temporary next to `path` until finish() syncs and renames it into place; a
// stream destroyed unfinished removes it, leaving the previous checkpoint intact.
//
// With `hash_at_finish`, write() only writes (into the page cache, at memory speed) and finish()
// reads the payload back to hash it: a writer that hands finish() to another thread
// (CheckpointWriter::finish_in_background) then waits for neither the hash nor the disk.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/hash.h"
#include "common/result.h"
#include "engine/io/checkpoint.h"

namespace dltune::engine {

class CheckpointStream {
 public:
  // Starts `path` for a payload of `params` floats, then one part per entry of `slots`, then
  // `state` floats; `meta`'s vectors are ignored. Errors: io_error naming the file.
  static Result<std::unique_ptr<CheckpointStream>> open(const std::string& path,
                                                        const Checkpoint& meta, size_t params,
                                                        std::vector<size_t> slots, size_t state,
                                                        bool hash_at_finish = false);
  ~CheckpointStream();
  CheckpointStream(const CheckpointStream&) = delete;
  CheckpointStream& operator=(const CheckpointStream&) = delete;

  // The next floats of the payload. Errors: io_error; internal_error past the declared size.
  Status write(std::span<const float> floats);
  // Floats written so far.
  size_t written() const { return written_; }
  // After exactly the declared floats: (with hash_at_finish, the payload read back and hashed)
  // the header, fsync, rename into place. Errors: io_error, internal_error when the payload is
  // short.
  Status finish();

 private:
  CheckpointStream() = default;
  std::string path_, tmp_;
  int fd_ = -1;
  Checkpoint meta_;
  size_t params_ = 0, state_ = 0, total_ = 0, written_ = 0;
  std::vector<size_t> slots_;
  Sha256 sha_;
  bool finished_ = false;
  bool hash_at_finish_ = false;
};

}  // namespace dltune::engine
