// engine/gpu in a build without CUDA: the same public functions, each returning an unsupported
// error with kNoCudaBuild. No GpuContext can be created, so the members below that cannot fail
// are never reached; they exist so that callers link without #if.
#include "engine/gpu/gpu_context.h"
#include "engine/gpu/gpu_layers.h"
#include "engine/gpu/gpu_ops.h"
#include "engine/gpu/offload.h"

namespace dltune::engine::gpu {

bool gpu_built() { return false; }
Result<int> gpu_device_count() { return unsupported(kNoCudaBuild); }
Result<uint64_t> device_memory_bytes(int) { return unsupported(kNoCudaBuild); }
uint64_t device_bytes_in_use() { return 0; }
uint64_t device_peak_bytes() { return 0; }
void reset_device_peak() {}

Result<DeviceBuffer> DeviceBuffer::alloc(size_t) { return unsupported(kNoCudaBuild); }
DeviceBuffer::~DeviceBuffer() = default;

struct GpuContext::Impl {};
GpuContext::GpuContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuContext::~GpuContext() = default;
Result<std::unique_ptr<GpuContext>> GpuContext::create(int) { return unsupported(kNoCudaBuild); }
int GpuContext::device() const { return -1; }
std::string GpuContext::device_name() const { return ""; }
void* GpuContext::stream() const { return nullptr; }
void* GpuContext::comm_stream() const { return nullptr; }
void* GpuContext::cublas() const { return nullptr; }
void* GpuContext::cudnn() const { return nullptr; }
void GpuContext::to_device(void*, const void*, size_t) {}
void GpuContext::to_host(void*, const void*, size_t) {}
void GpuContext::device_copy(void*, const void*, size_t) {}
void GpuContext::zero(void*, size_t) {}
Status GpuContext::synchronize() { return unsupported(kNoCudaBuild); }
Status GpuContext::take_status() { return unsupported(kNoCudaBuild); }
void GpuContext::fail(Error) {}
void GpuContext::comm_waits_for_compute() {}
void GpuContext::compute_waits_for_comm() {}
Status GpuContext::synchronize_comm() { return unsupported(kNoCudaBuild); }
void* GpuContext::scratch(size_t) { return nullptr; }

struct OffloadedState::Impl {};
OffloadedState::OffloadedState(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OffloadedState::~OffloadedState() = default;
Result<std::unique_ptr<OffloadedState>> OffloadedState::create(GpuContext&, int, int64_t, int64_t) {
  return unsupported(kNoCudaBuild);
}
int OffloadedState::vectors() const { return 0; }
int64_t OffloadedState::size() const { return 0; }
int64_t OffloadedState::chunk() const { return 0; }
int64_t OffloadedState::chunks() const { return 0; }
float* OffloadedState::host(int) { return nullptr; }
int64_t OffloadedState::device_bytes() const { return 0; }
void OffloadedState::update(const ChunkUpdate&) {}

Result<std::unique_ptr<Op>> make_gpu_op(const recipes::Node&, GpuContext&) {
  return unsupported(kNoCudaBuild);
}

void softmax_cross_entropy(GpuContext&, const float*, const int32_t*, int, int, float, float*,
                           double*) {}
void sgd_step(GpuContext&, float*, const float*, float*, int64_t, float, float, float) {}
void adamw_step(GpuContext&, float*, const float*, float*, float*, int64_t, float, float, float,
                float, float, int64_t) {}
size_t clip_scratch_doubles() { return 1; }
void clip_grad_norm(GpuContext&, float*, int64_t, double, double*) {}

}  // namespace dltune::engine::gpu
