// The GPU engine's device context: one CUDA device, a compute stream and a communication
// stream, the cuBLAS and cuDNN handles bound to the compute stream, a shared scratch area and
// RAII device buffers.
//
// This header compiles in every build. In a build without CUDA (DLTUNE_HAVE_CUDA == 0) every
// function that would touch a device returns an unsupported error with kNoCudaBuild, so callers
// need no #if. CUDA types appear as void* (cudaStream_t, cublasHandle_t, cudnnHandle_t).
//
// Errors during asynchronous work: the GPU layers run inside the void forward/backward of the
// Layer interface, so a failing CUDA / cuBLAS / cuDNN call records the FIRST error in the
// context (fail()); GpuModel and the trainer collect it with take_status() after each phase.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"

namespace dltune::engine::gpu {

inline constexpr const char* kNoCudaBuild =
    "this dltune was built without CUDA (DLTUNE_WITH_CUDA=OFF or no toolkit found)";

// True when this build has the GPU engine (CUDA, cuBLAS, cuDNN).
bool gpu_built();

// Number of CUDA devices this process can see. Errors (unsupported): a build without CUDA
// (kNoCudaBuild), or no usable device: "no CUDA device: cudaGetDeviceCount said <CUDA's
// error string>" (no driver, no device, CUDA_VISIBLE_DEVICES empty). GPU tests skip with it.
Result<int> gpu_device_count();

// Total memory of visible device `device` in bytes (cudaGetDeviceProperties' totalGlobalMem).
// Errors: as gpu_device_count(); invalid_input for an index out of range.
Result<uint64_t> device_memory_bytes(int device);

// Bytes of device memory held in DeviceBuffers by this process now, and the most held at once
// since the last reset_device_peak() (or the start): what the engine itself allocates, the
// figure the memory model estimates (libraries' own workspaces and the CUDA context are not in
// it). 0 without CUDA.
uint64_t device_bytes_in_use();
uint64_t device_peak_bytes();
void reset_device_peak();

// Owning device memory (cudaMalloc / cudaFree). Move-only; an empty buffer holds nullptr.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Allocates `bytes` (zeroed). Errors: unsupported without CUDA; internal with CUDA's message
  // when the allocation fails ("cudaMalloc of N bytes: out of memory").
  static Result<DeviceBuffer> alloc(size_t bytes);
  static Result<DeviceBuffer> alloc_floats(size_t n) { return alloc(n * sizeof(float)); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    DeviceBuffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return ptr_; }
  float* floats() const { return static_cast<float*>(ptr_); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void swap(DeviceBuffer& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class GpuContext {
 public:
  // Selects `device` (an index among the visible devices, usually 0: the launcher makes one GPU
  // visible per rank) and creates the streams and library handles. Errors: unsupported without
  // CUDA or without a device (gpu_device_count's reason); invalid_input for an index out of
  // range ("GPU 3 does not exist: 1 visible device(s)"); internal when a library fails to
  // initialise.
  static Result<std::unique_ptr<GpuContext>> create(int device);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int device() const;
  std::string device_name() const;  // "NVIDIA H200"
  void* stream() const;             // cudaStream_t: all compute work
  void* comm_stream() const;        // cudaStream_t: gradient communication
  void* cublas() const;             // cublasHandle_t bound to stream()
  void* cudnn() const;              // cudnnHandle_t bound to stream()

  // Asynchronous copies on the compute stream (host memory should outlive the copy: pass
  // pinned or long-lived buffers, or synchronize()). Errors are recorded (fail()).
  void to_device(void* dst, const void* src, size_t bytes);
  void to_host(void* dst, const void* src, size_t bytes);
  void device_copy(void* dst, const void* src, size_t bytes);
  void zero(void* dst, size_t bytes);
  // Waits for the compute stream; returns and clears the first recorded error (also CUDA's
  // last error): take_status() after synchronize() reports everything queued so far.
  Status synchronize();
  // The first recorded error since the last call (without waiting), cleared.
  Status take_status();
  // Records `error` unless an earlier one is pending (the first error is the informative one).
  void fail(Error error);

  // The comm stream waits for everything enqueued on the compute stream so far (an event), so
  // a collective enqueued next on comm_stream() sees the gradients backward has produced.
  void comm_waits_for_compute();
  // The compute stream waits for everything enqueued on the comm stream so far.
  void compute_waits_for_comm();
  // Waits for the comm stream (host side).
  Status synchronize_comm();

  // Scratch device memory shared by all layers (they run one after another on one stream):
  // at least `bytes`, valid until the next scratch() call that grows it. nullptr (and an error
  // recorded) when the allocation fails.
  void* scratch(size_t bytes);

  struct Impl;

 private:
  explicit GpuContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dltune::engine::gpu
