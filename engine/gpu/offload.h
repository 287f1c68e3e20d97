// The optimizer state in pinned host memory (ZeRO-Offload, AxoNN): what lets a model whose
// parameters, gradients and activations fit the GPU train there when its optimizer state (1x
// the parameters for SGD's velocity, 2x for AdamW's moments) would not.
//
// How an update runs. The state, `vectors` vectors of n floats, lives in page-locked host
// memory. The device holds two staging buffers per vector of `chunk` floats each
// (kOffloadChunkFloats, planning/memory_model.h, by default; one buffer when one chunk holds
// the whole vector). Chunk c of the update uses buffer b = c % 2:
//   copy stream:    waits until chunk c - 2 has left buffer b (event stored[b]), copies the
//                   state's chunk c host -> buffer b, records loaded[b];
//   compute stream: waits for loaded[b], runs the update on the parameters', gradients' and
//                   buffer b's chunk (the caller's kernel), records updated[b];
//   copy stream:    waits for updated[b], copies buffer b -> the state's chunk c, records
//                   stored[b].
// Chunk c + 1 loads while chunk c updates, and chunk c stores while chunk c + 1 updates; the
// copies run on their own stream, so the compute stream is never blocked by PCIe. At the end
// the compute stream waits for the last store: GpuContext::synchronize() covers the whole
// update, and the host copy is current once it returns. The update is the device-resident
// optimizer's kernel applied chunk by chunk: element-wise, so the parameters come out bit for
// bit as with the state on the device (engine_gpu_test checks it).
//
// Compiles in every build; without CUDA create() returns kNoCudaBuild (gpu_context.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "common/result.h"
#include "engine/gpu/gpu_context.h"
#include "planning/memory_model.h"

namespace dltune::engine::gpu {

class OffloadedState {
 public:
  // Allocates `vectors` (1..4) zeroed host vectors of n floats (cudaHostAlloc) and the staging
  // buffers, and a copy stream and events on ctx's device. Errors: invalid_input for vectors
  // outside 1..4, n < 1 or chunk < 1; unsupported without CUDA; internal with CUDA's message when
  // pinned or device memory runs out.
  static Result<std::unique_ptr<OffloadedState>> create(
      GpuContext& ctx, int vectors, int64_t n, int64_t chunk = planning::kOffloadChunkFloats);
  ~OffloadedState();
  OffloadedState(const OffloadedState&) = delete;
  OffloadedState& operator=(const OffloadedState&) = delete;

  int vectors() const;
  int64_t size() const;    // n
  int64_t chunk() const;   // floats per staging buffer
  int64_t chunks() const;  // ceil(n / chunk)
  // Vector v (0 <= v < vectors()) in pinned host memory, n floats. Read or write it only while
  // no update is in flight (after the context's synchronize()).
  float* host(int v);
  // Device bytes of the staging buffers (buffers x vectors x min(n, chunk) floats, buffers 2,
  // or 1 when n <= chunk): the memory model's optimizer term.
  int64_t device_bytes() const;

  // Enqueues one update over every chunk as described above. fn(begin, count, state) must
  // enqueue its work on the context's compute stream and return; state[v] points at vector v's
  // staged chunk on the device (count floats, for elements [begin, begin + count)). CUDA errors
  // are recorded in the context (GpuContext::fail) and surface at its synchronize().
  using ChunkUpdate = std::function<void(int64_t begin, int64_t count, float* const* state)>;
  void update(const ChunkUpdate& fn);

  struct Impl;

 private:
  explicit OffloadedState(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dltune::engine::gpu
