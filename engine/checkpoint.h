// Checkpoints: model parameters, optimizer state (momentum), step, data order and RNG state,
// written atomically (temporary file + fsync + rename), so a crash leaves the previous
// checkpoint intact and resuming continues exactly where training stopped.
//
// File format: the line "DLTUNE-CHECKPOINT 1", one line of JSON metadata (model, step, seed,
// global batch, ranks, epoch, rng state, counts, sha256 of the payload), then the payload:
// params then velocity, little-endian float32.
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
  std::vector<float> params, velocity;
};

// Writes `ck` to `path` atomically. Errors: io_error naming the path.
Status save_checkpoint(const std::string& path, const Checkpoint& ck);
// The same with the parameters and velocity read in place (`ck`'s vectors are ignored): no
// copy of a large model in memory; the checksum is computed while the parts are handed to
// the file, which is written from them directly.
Status save_checkpoint(const std::string& path, const Checkpoint& ck, std::span<const float> params,
                       std::span<const float> velocity);
// Reads and verifies a checkpoint: header, metadata, sizes and checksum. Errors
// (invalid_input) name the path and what is wrong ("truncated", "checksum mismatch", ...).
Result<Checkpoint> load_checkpoint(const std::string& path);

}  // namespace dltune::engine
