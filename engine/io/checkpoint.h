// Checkpoints: model parameters, optimizer state (SGD's momentum, AdamW's moments and step
// count), non-trainable model state (batch-norm statistics), step, data order and RNG state,
// written atomically (temporary file + fsync + rename), so a crash leaves the previous
// checkpoint intact and resuming continues exactly where training stopped.
//
// File format: the line "DLTUNE-CHECKPOINT 2", one line of JSON metadata (model, step, seed,
// global batch, epoch, rng state, optimizer kind and steps, the float count of every part, the
// sha256 of the payload), then the payload: params, each optimizer slot, model state,
// little-endian float32. Version 1 files (params then velocity) still load.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace dltune::engine {

struct Checkpoint {
  std::string model;
  int64_t step = 0;        // steps completed
  uint64_t seed = 0;       // data order + dropout seed (the order is a function of seed, step)
  int global_batch = 0;    // data order depends on it
  int64_t epoch = 0;       // informational: epoch of the next step
  uint64_t rng_state = 0;  // trainer RNG state
  std::string optimizer = "sgd";
  int64_t optimizer_steps = 0;
  std::vector<float> params;
  std::vector<std::vector<float>> slots;  // optimizer state: sgd {velocity}, adamw {m, v}
  std::vector<float> state;               // model state (batch-norm running statistics)
};

// Fault injection for tests: inside the write of the checkpoint of step `step`, before its file
// is renamed into place, sleeps as DLTUNE_FAULT_CHECKPOINT_STALL_MS says ("MS": every write;
// "STEP:MS": only step STEP's; at most 60 s; nothing when unset or malformed), so that a test can
// fail the job while that checkpoint is being written.
void checkpoint_fault_stall(int64_t step);

// Writes `ck` to `path` atomically. Errors: io_error naming the path.
Status save_checkpoint(const std::string& path, const Checkpoint& ck);
// The same with the parts read in place (`ck`'s vectors are ignored): no copy of a large model
// in memory; the checksum is computed while the parts are handed to the file, which is written
// from them directly.
Status save_checkpoint(const std::string& path, const Checkpoint& ck, std::span<const float> params,
                       const std::vector<std::span<const float>>& slots,
                       std::span<const float> state);
// Reads and verifies a checkpoint: header, metadata, sizes and checksum; read again (up to three
// times) when a new checkpoint replaces it while it is read (a training writing as it is
// resumed or inspected). Errors (invalid_input) name the path and what is wrong ("truncated",
// "checksum mismatch", ...); io_error when it kept being replaced.
Result<Checkpoint> load_checkpoint(const std::string& path);

// Reading a checkpoint without holding it (a pipeline stage resumes only its own tensors, and
// the whole model may not fit a rank): the header first, then the payload streamed once in
// 1 MiB chunks through the checksum, each wanted piece copied straight to its destination.

// A checkpoint's metadata (`meta`, whose vectors stay empty) and the float count of each
// payload part.
struct CheckpointInfo {
  Checkpoint meta;
  size_t params = 0, state = 0;
  std::vector<size_t> slots;
  size_t payload_offset = 0;  // bytes before the payload
  std::string sha256;         // the payload's, from the metadata
  // The file read (device and inode): a checkpoint written over it in the meantime is another
  // file (save_checkpoint() renames a new one into place), which read_checkpoint_pieces() refuses.
  uint64_t file_dev = 0, file_ino = 0;
};
// Floats [offset, offset + count) of payload part `part` (0 the parameters, 1 + k optimizer slot
// k, 1 + slots.size() the model state), to be copied to dst.
struct CheckpointPiece {
  size_t part = 0, offset = 0, count = 0;
  float* dst = nullptr;
};
// The header and metadata of `path`, with the payload's size checked against the file's (not
// its checksum). Errors: as load_checkpoint().
Result<CheckpointInfo> read_checkpoint_info(const std::string& path);
// Reads the payload of `path` (described by `info`) once, verifying its checksum and copying
// each piece as it passes. Errors: invalid_input for a piece outside its part (nothing read);
// io_error when `path` is no longer the file `info` was read from (nothing read: a header of
// one checkpoint and the payload of the next would not match);
// as load_checkpoint() otherwise: after a checksum mismatch the destinations hold the corrupt
// file's values, so the caller must not use them.
Status read_checkpoint_pieces(const std::string& path, const CheckpointInfo& info,
                              std::vector<CheckpointPiece> pieces);

}  // namespace dltune::engine
