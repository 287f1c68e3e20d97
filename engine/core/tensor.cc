#include "engine/core/tensor.h"

#include <cstdlib>
#include <cstring>

#include <cblas.h>

#include "common/check.h"

// OpenBLAS's (pthread build) thread pool shutdown, exported for its fork handler but not
// declared in cblas.h; weak, so that other BLAS libraries link (and it is null there).
extern "C" int blas_thread_shutdown_() __attribute__((weak));

namespace dltune::engine {

void Buffer::Free::operator()(float* p) const { std::free(p); }

void Buffer::resize(size_t n) {
  resize_uninitialized(n);
  if (n > 0) std::memset(data_.get(), 0, n * sizeof(float));
}

void Buffer::resize_uninitialized(size_t n) {
  data_.reset();
  size_ = 0;
  if (n == 0) return;
  size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  DLTUNE_CHECK(p != nullptr, "out of memory allocating " + std::to_string(bytes) + " bytes");
  data_.reset(static_cast<float*>(p));
  size_ = n;
}

void set_blas_threads(int threads) {
  openblas_set_num_threads(threads < 1 ? 1 : threads);
  if (threads <= 1) stop_idle_blas_threads();
}

void stop_idle_blas_threads() {
  if (blas_thread_shutdown_ != nullptr) blas_thread_shutdown_();
}
int blas_threads() { return openblas_get_num_threads(); }

}  // namespace dltune::engine
