#include "engine/train/training_memory.h"

#include <algorithm>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "common/rss.h"
#include "engine/gpu/gpu_context.h"
#include "engine/ops/library_threads.h"

namespace dltune::engine {

MemoryBaseline MemoryBaseline::take(bool trim) {
#if defined(__GLIBC__)
  if (trim) malloc_trim(0);
#else
  (void)trim;
#endif
  use_engine_threads_for_libraries();  // the libraries' own state is the process's, not ours
  MemoryBaseline b;
  b.restarted_ = rss::restart_peak();
  b.rss_ = rss::current_bytes();
  b.shmem_ = rss::shmem_bytes();
  gpu::reset_device_peak();
  return b;
}

int64_t MemoryBaseline::peak_bytes(const Trainer& trainer) const {
  if (trainer.on_gpu()) return static_cast<int64_t>(gpu::device_peak_bytes());
  if (!restarted_) return -1;
  const int64_t peers_shared =
      std::max<int64_t>(0, rss::shmem_bytes() - shmem_ - trainer.node_shared_gradient_bytes());
  return std::max<int64_t>(0, rss::peak_bytes() - rss_ - peers_shared);
}

}  // namespace dltune::engine
