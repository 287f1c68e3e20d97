#include "engine/core/parallel.h"

namespace dltune::engine {

void sum_partials(ThreadPool& pool, const float* partials, int64_t stride, int64_t count, int64_t n,
                  float* dst, bool accumulate) {
  parallel_elements(pool, n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      float s = accumulate ? dst[i] : 0.0f;
      for (int64_t t = 0; t < count; ++t) s += partials[t * stride + i];
      dst[i] = s;
    }
  });
}

}  // namespace dltune::engine
