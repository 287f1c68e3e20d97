#include "engine/tensor.h"

#include <cstdlib>
#include <cstring>

#include <cblas.h>
#include <sys/mman.h>

#include "common/check.h"

// OpenBLAS's (pthread build) thread pool shutdown, exported for its fork handler but not
// declared in cblas.h; weak, so that other BLAS libraries link (and it is null there).
extern "C" int blas_thread_shutdown_() __attribute__((weak));

namespace dltune::engine {
namespace {

// Asks for transparent huge pages on the whole 2 MiB extents inside [p, p + bytes): one page
// fault per 2 MiB instead of 512 when the buffer is first written. Faults are dear in VMs: a
// new trainer's first step took ~10x a normal one here, mostly in them, and the recipe tuner
// builds a trainer per candidate. The buffer itself keeps its address (no 2 MiB alignment,
// which would put every large buffer on the same cache sets). A no-op for small buffers and
// where THP is off; madvise errors are ignored (the pages are then just small).
void advise_huge_pages(void* p, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

}  // namespace

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
  advise_huge_pages(p, bytes);
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
