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
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_release);
  futex_wake_all(&generation_);
  for (auto& w : workers_) w.join();
  if (restore_mask_) {
    cpu_set_t mask;
    std::memcpy(&mask, caller_mask_.data(), sizeof mask);
    pthread_setaffinity_np(pthread_self(), sizeof mask, &mask);
  }
}

void ThreadPool::work(int thread) {
  t_in_task = true;
  t_thread_index = thread;
  for (;;) {
    const int64_t task = next_.fetch_add(1, std::memory_order_relaxed);
    if (task >= tasks_) break;
    fn_(ctx_, task, thread);
  }
  t_in_task = false;
  t_thread_index = 0;
}

void ThreadPool::worker(int index) {
  if (!cpus_.empty()) pin_self(cpus_[static_cast<size_t>(index) % cpus_.size()]);
  uint32_t seen = 0;
  for (;;) {
    auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    while (!spin_until(changed, kSpinMicros)) {
      sleepers_.fetch_add(1);
      futex_wait(&generation_, seen);
      sleepers_.fetch_sub(1);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    work(index);
    if (busy_.fetch_sub(1) == 1) {
      done_.fetch_add(1);
      if (caller_waits_.load() != 0) futex_wake_all(&done_);
    }
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
  fn_ = fn;
  ctx_ = ctx;
  tasks_ = tasks;
  next_.store(0, std::memory_order_relaxed);
  busy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  const uint32_t done = done_.load(std::memory_order_relaxed);
  generation_.fetch_add(1);
  if (sleepers_.load() != 0) futex_wake_all(&generation_);
  work(0);
  auto finished = [&] { return busy_.load(std::memory_order_acquire) == 0; };
  while (!spin_until(finished, kSpinMicros)) {
    caller_waits_.store(1);
    futex_wait(&done_, done);  // returns at once when the last worker bumped done_ already
    caller_waits_.store(0);
  }
}

}  // namespace dltune::engine
