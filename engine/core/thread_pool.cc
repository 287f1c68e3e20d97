#include "engine/core/thread_pool.h"

#include <chrono>
#include <cstring>

#include <immintrin.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"

namespace dltune::engine {
namespace {

thread_local int t_thread_index = 0;
thread_local bool t_in_task = false;

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
          nullptr, 0);
}

// The CPUs of the calling thread's affinity mask, in order.
std::vector<int> allowed_cpus(cpu_set_t* mask) {
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(cpu_set_t), mask) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, mask)) cpus.push_back(c);
  return cpus;
}

bool pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Spins until pred() or about `micros` have passed; returns pred().
template <class Pred>
bool spin_until(Pred pred, int micros) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  for (int i = 0;; ++i) {
    if (pred()) return true;
    _mm_pause();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return pred();
  }
}

}  // namespace

int current_thread_index() { return t_thread_index; }

ThreadPool& ThreadPool::serial() {
  static ThreadPool pool(1, false);
  return pool;
}

ThreadPool::ThreadPool(int threads, bool pin) {
  threads_ = threads < 1 ? 1 : threads > 1024 ? 1024 : threads;
  if (threads_ == 1) return;
  if (pin) {
    cpu_set_t mask;
    cpus_ = allowed_cpus(&mask);
    if (!cpus_.empty()) {
      caller_mask_.assign(reinterpret_cast<unsigned char*>(&mask),
                          reinterpret_cast<unsigned char*>(&mask) + sizeof mask);
      static std::atomic<bool> warned{false};  // once per process
      if (static_cast<int>(cpus_.size()) < threads_ && !warned.exchange(true)) {
        DLTUNE_LOG(kWarn, "engine")
            << threads_ << " threads on a binding of " << cpus_.size()
            << " CPU(s): threads share cores (2-5x slower per thread); give the rank " << threads_
            << " cores or use " << cpus_.size() << " thread(s)";
      }
      restore_mask_ = pin_self(cpus_[0]);
    }
  }
  workers_.reserve(static_cast<size_t>(threads_ - 1));
  for (int t = 1; t < threads_; ++t) workers_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
  if (workers_.empty()) return;
  stop_.store(true);
  wake_.fetch_add(1);
  futex_wake_all(&wake_);
  for (auto& w : workers_) w.join();
  if (restore_mask_) {
    cpu_set_t mask;
    std::memcpy(&mask, caller_mask_.data(), sizeof mask);
    pthread_setaffinity_np(pthread_self(), sizeof mask, &mask);
  }
}

void ThreadPool::work(int thread) {
  const bool was = t_in_task;
  t_in_task = true;
  t_thread_index = thread;
  for (;;) {
    const int64_t task = next_.fetch_add(1, std::memory_order_relaxed);
    if (task >= tasks_) break;
    fn_(ctx_, task, thread);
    // The last task's completion wakes a sleeping caller.
    if (completed_.fetch_add(1) + 1 == static_cast<uint32_t>(tasks_) && caller_waits_.load() != 0)
      futex_wake_all(&completed_);
  }
  t_in_task = was;
  t_thread_index = 0;
}

void ThreadPool::worker(int index) {
  if (!cpus_.empty()) pin_self(cpus_[static_cast<size_t>(index) % cpus_.size()]);
  uint32_t seen_wake = 0;
  uint64_t joined = 1;  // the last generation this worker joined (or saw closed)
  for (;;) {
    auto published = [&] { return wake_.load(std::memory_order_acquire) != seen_wake; };
    while (!spin_until(published, kSpinMicros)) {
      sleepers_.fetch_add(1);
      futex_wait(&wake_, seen_wake);
      sleepers_.fetch_sub(1);
    }
    seen_wake = wake_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    // Join the open job, once: (g, n) -> (g, n + 1) while g is even and not joined before.
    uint64_t s = state_.load();
    bool in = false;
    while ((s >> 32) % 2 == 0 && (s >> 32) != joined) {
      if (state_.compare_exchange_weak(s, s + 1)) {
        in = true;
        break;
      }
    }
    if (!in) continue;  // closed already (the caller finished without this worker)
    joined = s >> 32;
    work(index);
    state_.fetch_sub(1);  // leave
  }
}

void ThreadPool::run_erased(int64_t tasks, TaskFn fn, void* ctx) {
  if (tasks <= 0) return;
  if (workers_.empty() || t_in_task || tasks == 1) {
    const bool was = t_in_task;
    t_in_task = true;
    for (int64_t i = 0; i < tasks; ++i) fn(ctx, i, t_thread_index);
    t_in_task = was;
    return;
  }
  // The generation is odd (closed) here: no worker is inside, none can join.
  fn_ = fn;
  ctx_ = ctx;
  tasks_ = tasks;
  next_.store(0, std::memory_order_relaxed);
  completed_.store(0, std::memory_order_relaxed);
  const uint64_t open = ((state_.load() >> 32) + 1) << 32;  // the next even generation, nobody in
  state_.store(open);
  wake_.fetch_add(1);
  if (sleepers_.load() != 0) futex_wake_all(&wake_);
  work(0);
  const auto n = static_cast<uint32_t>(tasks);
  auto done = [&] { return completed_.load(std::memory_order_acquire) == n; };
  while (!spin_until(done, kSpinMicros)) {
    const uint32_t c = completed_.load();
    if (c == n) break;
    caller_waits_.store(1);
    futex_wait(&completed_, c);  // returns at once when a task completed since
    caller_waits_.store(0);
  }
  // Close the job once no worker is inside (those inside are past their last task: they only
  // have to see the counter exhausted and leave).
  uint64_t s = open;
  for (int i = 0;; ++i) {
    s = state_.load();
    if ((s & 0xFFFFFFFFull) == 0 && state_.compare_exchange_weak(s, s + (1ull << 32))) break;
    _mm_pause();
    if ((i & 1023) == 1023) sched_yield();
  }
}

}  // namespace dltune::engine
