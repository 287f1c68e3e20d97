// Partitions for the ops' parallel loops, and the fixed-order reduction that keeps results
// independent of the thread count (engine/core/thread_pool.h says why tasks must be).
//
// The rule every op follows: a task's boundaries are a function of the shapes only (never of
// ThreadPool::threads()), each task writes its own outputs, and a sum across tasks goes through
// one partial buffer per task, added in task order (sum_partials). The thread count then decides
// only who computes what, so a step's results are the same bits on 1, 2, 3 or 4 threads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/core/thread_pool.h"

namespace dltune::engine {

// Task counts the parallel loops choose from: they divide evenly over 1, 2, 3, 4 and 6 threads
// where the work allows (12, 24, 48), so no thread count leaves one thread a task behind.
inline int64_t nice_task_count(int64_t want) {
  static constexpr int64_t kNice[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 48, 96, 192};
  int64_t best = 1;
  for (int64_t n : kNice)
    if (n <= want) best = n;
  return best;
}

// Tasks for `units` independent units of work each costing `unit_cost` (any measure: floats
// touched, multiply-adds), aiming at no less than `min_task_cost` per task and at most `units`
// tasks. A function of its arguments only.
inline int64_t task_count(int64_t units, double unit_cost, double min_task_cost) {
  if (units <= 1) return units < 1 ? 0 : 1;
  const double total = static_cast<double>(units) * std::max(unit_cost, 1.0);
  const auto want = static_cast<int64_t>(total / std::max(min_task_cost, 1.0));
  return std::min(units, nice_task_count(std::max<int64_t>(want, 1)));
}

// [begin, end) of part `part` of `parts` near-equal parts of [0, n).
inline void part_range(int64_t n, int64_t parts, int64_t part, int64_t* begin, int64_t* end) {
  *begin = n * part / parts;
  *end = n * (part + 1) / parts;
}

// Runs fn(begin, end, thread) over [0, n) in `parts` near-equal ranges (parts from the shapes).
template <class F>
void parallel_ranges(ThreadPool& pool, int64_t n, int64_t parts, F&& fn) {
  if (n <= 0) return;
  parts = std::clamp<int64_t>(parts, 1, n);
  pool.run(parts, [&](int64_t p, int thread) {
    int64_t b = 0, e = 0;
    part_range(n, parts, p, &b, &e);
    if (e > b) fn(b, e, thread);
  });
}

// Element-wise work over n floats: ranges of at least 16 Ki floats (64 KiB: below that a
// task's start costs more than its work), a multiple of 16 floats each (whole cache lines).
template <class F>
void parallel_elements(ThreadPool& pool, int64_t n, F&& fn) {
  constexpr int64_t kMin = int64_t{1} << 14;
  const int64_t parts = pool.threads() == 1 ? 1 : task_count((n + 15) / 16, 16.0, kMin);
  if (parts <= 1) {
    if (n > 0) fn(int64_t{0}, n, 0);
    return;
  }
  const int64_t lines = (n + 15) / 16;
  pool.run(parts, [&](int64_t p, int thread) {
    int64_t b = 0, e = 0;
    part_range(lines, parts, p, &b, &e);
    b *= 16;
    e = std::min(n, e * 16);
    if (e > b) fn(b, e, thread);
  });
}

// dst[i] = (dst[i] if accumulate, else 0) + partials[0][i] + partials[1][i] + ... in that
// order, for i in [0, n): partial t at partials + t * stride. Parallel over i; the sum's order
// is fixed, so the bits do not depend on the thread count.
void sum_partials(ThreadPool& pool, const float* partials, int64_t stride, int64_t count, int64_t n,
                  float* dst, bool accumulate);

}  // namespace dltune::engine
