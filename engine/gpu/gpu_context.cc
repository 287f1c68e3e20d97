// The CUDA implementation of gpu_context.h (compiled only when DLTUNE_HAVE_CUDA).
#include "engine/gpu/gpu_context.h"

#include <atomic>
#include <mutex>
#include <optional>

#include "engine/gpu/cuda_check.h"

namespace dltune::engine::gpu {

bool gpu_built() { return true; }

Result<int> gpu_device_count() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error for later calls
    return unsupported(std::string("no CUDA device: cudaGetDeviceCount said ") +
                       cudaGetErrorString(e));
  }
  if (n <= 0) return unsupported("no CUDA device: cudaGetDeviceCount found 0 devices");
  return n;
}

Result<uint64_t> device_memory_bytes(int device) {
  auto n = gpu_device_count();
  if (!n) return n.error();
  if (device < 0 || device >= *n)
    return invalid_input("GPU " + std::to_string(device) +
                         " does not exist: " + std::to_string(*n) + " visible device(s)");
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda_error(e, "cudaGetDeviceProperties");
  }
  return static_cast<uint64_t>(prop.totalGlobalMem);
}

// ---- DeviceBuffer --------------------------------------------------------------------------

namespace {
std::atomic<uint64_t> g_in_use{0}, g_peak{0};  // DeviceBuffer bytes
}  // namespace

uint64_t device_bytes_in_use() { return g_in_use.load(); }
uint64_t device_peak_bytes() { return g_peak.load(); }
void reset_device_peak() { g_peak.store(g_in_use.load()); }

Result<DeviceBuffer> DeviceBuffer::alloc(size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda_error(e, "cudaMalloc of " + std::to_string(bytes) + " bytes");
  }
  // cudaMemset runs on the legacy default stream and may still be running when it returns; the
  // context's streams are non-blocking (no implicit ordering with that stream), so a kernel
  // enqueued next could write the buffer before the zeros land, or read it before. Wait here:
  // allocations happen while setting up and reserving, not per step.
  cudaError_t e = cudaMemset(p, 0, bytes);
  if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamLegacy);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    cudaFree(p);
    return cuda_error(e, "zeroing " + std::to_string(bytes) + " bytes of GPU memory");
  }
  b.ptr_ = p;
  b.bytes_ = bytes;
  const uint64_t now = g_in_use.fetch_add(bytes) + bytes;
  uint64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return b;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) {
    cudaFree(ptr_);
    g_in_use.fetch_sub(bytes_);
  }
}

// ---- GpuContext ------------------------------------------------------------------------------

struct GpuContext::Impl {
  int device = 0;
  std::string name;
  cudaStream_t stream = nullptr, comm = nullptr;
  cudaEvent_t compute_done = nullptr, comm_done = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  DeviceBuffer scratch;
  std::mutex mu;  // guards `error` (fail() may be called from a communication thread)
  std::optional<Error> error;

  ~Impl() {
    if (stream) cudaStreamSynchronize(stream);
    if (comm) cudaStreamSynchronize(comm);
    if (cudnn) cudnnDestroy(cudnn);
    if (cublas) cublasDestroy(cublas);
    if (compute_done) cudaEventDestroy(compute_done);
    if (comm_done) cudaEventDestroy(comm_done);
    if (stream) cudaStreamDestroy(stream);
    if (comm) cudaStreamDestroy(comm);
  }
};

GpuContext::GpuContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuContext::~GpuContext() = default;

Result<std::unique_ptr<GpuContext>> GpuContext::create(int device) {
  auto count = gpu_device_count();
  if (!count) return count.error();
  if (device < 0 || device >= *count)
    return invalid_input("GPU " + std::to_string(device) +
                         " does not exist: " + std::to_string(*count) + " visible device(s)");
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  const std::string where = "initialising GPU " + std::to_string(device);
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return cuda_error(e, where);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) impl->name = prop.name;
  if (cudaError_t e = cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking);
      e != cudaSuccess)
    return cuda_error(e, where);
  if (cudaError_t e = cudaStreamCreateWithFlags(&impl->comm, cudaStreamNonBlocking);
      e != cudaSuccess)
    return cuda_error(e, where);
  if (cudaError_t e = cudaEventCreateWithFlags(&impl->compute_done, cudaEventDisableTiming);
      e != cudaSuccess)
    return cuda_error(e, where);
  if (cudaError_t e = cudaEventCreateWithFlags(&impl->comm_done, cudaEventDisableTiming);
      e != cudaSuccess)
    return cuda_error(e, where);
  if (cublasStatus_t s = cublasCreate(&impl->cublas); s != CUBLAS_STATUS_SUCCESS)
    return cublas_error(s, where);
  // Plain FP32 (no TF32), so results match the CPU engine to float rounding.
  if (cublasStatus_t s = cublasSetMathMode(impl->cublas, CUBLAS_DEFAULT_MATH);
      s != CUBLAS_STATUS_SUCCESS)
    return cublas_error(s, where);
  if (cublasStatus_t s = cublasSetStream(impl->cublas, impl->stream); s != CUBLAS_STATUS_SUCCESS)
    return cublas_error(s, where);
  if (cudnnStatus_t s = cudnnCreate(&impl->cudnn); s != CUDNN_STATUS_SUCCESS)
    return cudnn_error(s, where);
  if (cudnnStatus_t s = cudnnSetStream(impl->cudnn, impl->stream); s != CUDNN_STATUS_SUCCESS)
    return cudnn_error(s, where);
  return std::unique_ptr<GpuContext>(new GpuContext(std::move(impl)));
}

int GpuContext::device() const { return impl_->device; }
std::string GpuContext::device_name() const { return impl_->name; }
void* GpuContext::stream() const { return impl_->stream; }
void* GpuContext::comm_stream() const { return impl_->comm; }
void* GpuContext::cublas() const { return impl_->cublas; }
void* GpuContext::cudnn() const { return impl_->cudnn; }

void GpuContext::to_device(void* dst, const void* src, size_t bytes) {
  cuda_ok(*this, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, impl_->stream),
          "copying to the GPU");
}
void GpuContext::to_host(void* dst, const void* src, size_t bytes) {
  cuda_ok(*this, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, impl_->stream),
          "copying from the GPU");
}
void GpuContext::device_copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  cuda_ok(*this, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, impl_->stream),
          "copying on the GPU");
}
void GpuContext::zero(void* dst, size_t bytes) {
  cuda_ok(*this, cudaMemsetAsync(dst, 0, bytes, impl_->stream), "zeroing GPU memory");
}

void GpuContext::fail(Error error) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->error) impl_->error = std::move(error);
}

Status GpuContext::take_status() {
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    fail(cuda_error(e, "a GPU kernel failed to launch"));
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->error) return ok_status();
  Error e = std::move(*impl_->error);
  impl_->error.reset();
  return e;
}

Status GpuContext::synchronize() {
  cuda_ok(*this, cudaStreamSynchronize(impl_->stream), "waiting for the GPU");
  return take_status();
}

void GpuContext::comm_waits_for_compute() {
  cuda_ok(*this, cudaEventRecord(impl_->compute_done, impl_->stream), "recording an event");
  cuda_ok(*this, cudaStreamWaitEvent(impl_->comm, impl_->compute_done, 0), "waiting on an event");
}

void GpuContext::compute_waits_for_comm() {
  cuda_ok(*this, cudaEventRecord(impl_->comm_done, impl_->comm), "recording an event");
  cuda_ok(*this, cudaStreamWaitEvent(impl_->stream, impl_->comm_done, 0), "waiting on an event");
}

Status GpuContext::synchronize_comm() {
  cuda_ok(*this, cudaStreamSynchronize(impl_->comm), "waiting for GPU communication");
  return take_status();
}

void* GpuContext::scratch(size_t bytes) {
  if (bytes <= impl_->scratch.bytes()) return impl_->scratch.data();
  // Growing: earlier work may still read the old area.
  cuda_ok(*this, cudaStreamSynchronize(impl_->stream), "waiting for the GPU");
  impl_->scratch = DeviceBuffer();
  auto b = DeviceBuffer::alloc(bytes);
  if (!b) {
    fail(b.error().wrap("allocating GPU scratch memory"));
    return nullptr;
  }
  impl_->scratch = std::move(*b);
  return impl_->scratch.data();
}

}  // namespace dltune::engine::gpu
