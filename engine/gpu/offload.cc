// The CUDA implementation of offload.h (compiled only when DLTUNE_HAVE_CUDA).
//
// Enqueue order, which is what makes the copies overlap the updates: the copy stream runs in
// order, so each operation below also waits for everything enqueued on it before.
//   copy:    load(0)
//   for c:   copy: load(c + 1)         -- buffer (c + 1) % 2, after store(c - 1) in stream order
//            compute: wait loaded[c % 2]; update(c); record updated[c % 2]
//            copy: wait updated[c % 2]; store(c)
//   compute: wait for the copy stream's last store
#include "engine/gpu/offload.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine/gpu/cuda_check.h"

namespace dltune::engine::gpu {

struct OffloadedState::Impl {
  explicit Impl(GpuContext& c) : ctx(c) {}
  ~Impl() {
    if (copy != nullptr) cudaStreamSynchronize(copy);
    for (float* p : host)
      if (p != nullptr) cudaFreeHost(p);
    for (cudaEvent_t e : {loaded[0], loaded[1], updated[0], updated[1], done})
      if (e != nullptr) cudaEventDestroy(e);
    if (copy != nullptr) cudaStreamDestroy(copy);
  }

  GpuContext& ctx;
  int vectors = 0;
  int64_t n = 0, chunk = 0;
  std::vector<float*> host;           // pinned, one per vector
  std::vector<DeviceBuffer> staging;  // [buffer * vectors + v]
  cudaStream_t copy = nullptr;
  cudaEvent_t loaded[2] = {nullptr, nullptr}, updated[2] = {nullptr, nullptr}, done = nullptr;

  float* staged(int buffer, int v) const {
    return staging[static_cast<size_t>(buffer * vectors + v)].floats();
  }
  // Host -> staging buffer `buffer` for chunk c, or back (to_host), on the copy stream.
  void move(int64_t c, int buffer, bool to_host) {
    const int64_t begin = c * chunk;
    const size_t bytes = sizeof(float) * static_cast<size_t>(std::min(chunk, n - begin));
    for (int v = 0; v < vectors; ++v) {
      float* h = host[static_cast<size_t>(v)] + begin;
      float* d = staged(buffer, v);
      cuda_ok(
          ctx,
          to_host ? cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, copy)
                  : cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, copy),
          to_host ? "copying optimizer state to the host" : "copying optimizer state to the GPU");
    }
    if (!to_host) cuda_ok(ctx, cudaEventRecord(loaded[buffer], copy), "recording an offload event");
  }
};

OffloadedState::OffloadedState(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OffloadedState::~OffloadedState() = default;

Result<std::unique_ptr<OffloadedState>> OffloadedState::create(GpuContext& ctx, int vectors,
                                                               int64_t n, int64_t chunk) {
  if (vectors < 1 || vectors > 4)
    return invalid_input("offloaded optimizer state: 1 to 4 vectors, got " +
                         std::to_string(vectors));
  if (n < 1 || chunk < 1)
    return invalid_input("offloaded optimizer state: needs at least one float and a chunk of one");
  auto m = std::make_unique<Impl>(ctx);
  m->vectors = vectors;
  m->n = n;
  m->chunk = std::min(n, chunk);
  const size_t bytes = sizeof(float) * static_cast<size_t>(n);
  for (int v = 0; v < vectors; ++v) {
    void* p = nullptr;
    if (cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault); e != cudaSuccess) {
      (void)cudaGetLastError();
      return cuda_error(e, "cudaHostAlloc of " + std::to_string(bytes) +
                               " bytes of pinned memory for the optimizer state");
    }
    std::memset(p, 0, bytes);
    m->host.push_back(static_cast<float*>(p));
  }
  for (int64_t i = 0; i < planning::offload_buffers(n, m->chunk) * vectors; ++i) {
    auto b = DeviceBuffer::alloc_floats(static_cast<size_t>(m->chunk));
    if (!b) return b.error().wrap("the optimizer state's staging buffers");
    m->staging.push_back(std::move(*b));
  }
  if (cudaError_t e = cudaStreamCreateWithFlags(&m->copy, cudaStreamNonBlocking); e != cudaSuccess)
    return cuda_error(e, "creating the offload copy stream");
  for (cudaEvent_t* e : {&m->loaded[0], &m->loaded[1], &m->updated[0], &m->updated[1], &m->done})
    if (cudaError_t r = cudaEventCreateWithFlags(e, cudaEventDisableTiming); r != cudaSuccess)
      return cuda_error(r, "creating an offload event");
  return std::unique_ptr<OffloadedState>(new OffloadedState(std::move(m)));
}

int OffloadedState::vectors() const { return impl_->vectors; }
int64_t OffloadedState::size() const { return impl_->n; }
int64_t OffloadedState::chunk() const { return impl_->chunk; }
int64_t OffloadedState::chunks() const { return (impl_->n + impl_->chunk - 1) / impl_->chunk; }
float* OffloadedState::host(int v) { return impl_->host[static_cast<size_t>(v)]; }
int64_t OffloadedState::device_bytes() const {
  return static_cast<int64_t>(impl_->staging.size()) * impl_->chunk *
         static_cast<int64_t>(sizeof(float));
}

void OffloadedState::update(const ChunkUpdate& fn) {
  Impl& m = *impl_;
  GpuContext& ctx = m.ctx;
  cudaStream_t compute = stream_of(ctx);
  const int64_t count = chunks();
  float* state[4] = {nullptr, nullptr, nullptr, nullptr};
  m.move(0, 0, /*to_host=*/false);
  for (int64_t c = 0; c < count; ++c) {
    const int b = static_cast<int>(c % 2);
    if (c + 1 < count) m.move(c + 1, 1 - b, /*to_host=*/false);
    cuda_ok(ctx, cudaStreamWaitEvent(compute, m.loaded[b], 0), "waiting for optimizer state");
    for (int v = 0; v < m.vectors; ++v) state[v] = m.staged(b, v);
    const int64_t begin = c * m.chunk;
    fn(begin, std::min(m.chunk, m.n - begin), state);
    cuda_ok(ctx, cudaEventRecord(m.updated[b], compute), "recording an offload event");
    cuda_ok(ctx, cudaStreamWaitEvent(m.copy, m.updated[b], 0), "waiting for an update");
    m.move(c, b, /*to_host=*/true);
  }
  cuda_ok(ctx, cudaEventRecord(m.done, m.copy), "recording an offload event");
  cuda_ok(ctx, cudaStreamWaitEvent(compute, m.done, 0), "waiting for the optimizer state");
}

}  // namespace dltune::engine::gpu
