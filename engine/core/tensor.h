// Tensors for the CPU engine: 64-byte aligned float32 buffers and per-sample shapes.
//
// The engine follows llm.c: activations are plain float arrays in NCHW order, described by a
// batch size plus a per-sample Dims {c, h, w}; every kernel carries a shape comment such as
// `// in (B, C, H, W) -> out (B, OC, OH, OW)`. A fully connected activation is Dims{n, 1, 1}.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dltune::engine {

// Per-sample shape of an activation (channels, height, width).
struct Dims {
  int c = 0, h = 1, w = 1;
  int64_t size() const { return int64_t{c} * h * w; }
  bool operator==(const Dims&) const = default;
  std::string str() const;  // "(C, H, W)" or "(N)" when h == w == 1 (in layer_spec.cc)
};

// An owning, zero-initialised, 64-byte aligned float buffer. Moving is cheap; copying is not
// allowed (buffers are large). resize() discards the contents.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n) { resize(n); }
  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&&) noexcept = default;

  // Reallocates to exactly n zeroed floats (n == 0 frees). Aborts when memory is exhausted.
  void resize(size_t n);
  // As resize(), but the contents are unspecified: for scratch that is always written before
  // it is read. The pages of a large buffer are then not touched (faulted in) until written, so
  // a buffer sized for the largest case costs only what a smaller case uses.
  void resize_uninitialized(size_t n);
  // Grows to at least n floats, keeping nothing; a no-op when already large enough.
  void reserve(size_t n) {
    if (n > size_) resize(n);
  }
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }
  float& operator[](size_t i) { return data_[i]; }
  float operator[](size_t i) const { return data_[i]; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float[], Free> data_;
  size_t size_ = 0;
};

// Pins the BLAS library to `threads` threads (>= 1) for this process. The engine calls this
// once at start: ranks are the parallelism, so the default is 1 (a second pool would fight the
// other ranks for the cores; see notes/performance-facts.md).
// With 1, also ends the library's worker threads (stop_idle_blas_threads()).
void set_blas_threads(int threads);

// Ends the BLAS library's idle worker threads. OpenBLAS's pthread build starts them when it
// is loaded and they spin in sched_yield for ~0.1 s before they sleep: in a launcher, or a rank
// that keeps BLAS on one thread, that is a core taken from the ranks starting beside it
// (measured: `dltune run -n 1 -- /bin/true` used 1.6 CPUs for 105 ms). A later call that wants
// more threads starts them again. Does nothing with a BLAS library that has no such threads.
void stop_idle_blas_threads();
int blas_threads();

}  // namespace dltune::engine
