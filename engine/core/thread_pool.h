// The rank's threads: one small persistent pool per rank that every op of the CPU engine runs
// its work on (engine issue 38: intra-rank parallelism).
//
// How it works. The pool owns threads - 1 workers; the thread that calls run() is thread 0 and
// works too. run(tasks, fn) publishes one job (fn and a task count) under a new even
// generation; a worker joins it (one compare-and-swap on a word holding the generation and the
// count of workers inside), takes task indices from one shared atomic counter until none are
// left, and leaves. run() returns when every task has completed and no worker is inside: it
// never waits for a worker that has not joined (on a loaded machine a descheduled worker would
// otherwise stall every region), and closing the job (an odd generation) stops late workers
// from joining it. Workers wait for the next job spinning briefly (kSpinMicros: the ops of a
// training step follow each other within microseconds) and then sleep on a futex, so an idle
// rank costs no CPU. A task that calls run() again (a nested region) runs its tasks inline on
// its own thread.
//
// Determinism. Which thread runs which task is not fixed (the counter hands them out as threads
// get free), so callers make every task's result independent of the thread that runs it: tasks
// write disjoint outputs, and reductions across tasks go through per-task partial buffers summed
// in task order (engine/core/parallel.h). Task boundaries are functions of the shapes alone,
// never of the thread count, wherever a library (BLAS, oneDNN) computes inside a task: so the
// results do not depend on the thread count.
//
// Binding. Thread t is pinned to the t-th CPU of the caller's affinity mask (sched_getaffinity:
// the binding the launcher gave the rank), modulo the mask's size; thread 0 (the caller) is
// pinned while the pool lives and gets its mask back after. With more threads than CPUs in the
// mask the pool says so once (oversubscription costs 2-5x here: performance-facts.md) and pins
// modulo the mask.
//
// The libraries' own pools. OpenBLAS and oneDNN are called from inside tasks on one thread each
// (set_blas_threads(1), omp_set_num_threads(1) in every pool thread): the engine's N threads are
// their N threads, and no second pool ever competes for the rank's cores.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace dltune::engine {

class ThreadPool {
 public:
  // A pool of `threads` (>= 1; clamped to 1..1024) threads including the caller, pinned to the
  // caller's affinity mask when `pin` (thread t to the mask's (t mod size)-th CPU). With one
  // thread nothing is started and nothing is pinned.
  explicit ThreadPool(int threads, bool pin = true);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_; }

  // Runs fn(task, thread) for every task in [0, tasks), each once, on the pool's threads
  // (`thread` in [0, threads()): the index of the thread running it, for per-thread scratch),
  // and returns when all have run. Must be called from the thread that created the pool (or
  // from inside a task: then the tasks run inline, in order, on the calling thread with its
  // thread index). tasks <= 0 does nothing.
  template <class F>
  void run(int64_t tasks, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_erased(
        tasks, [](void* f, int64_t task, int thread) { (*static_cast<Fn*>(f))(task, thread); },
        static_cast<void*>(&fn));
  }

  // The pool of one thread (runs everything inline): the default of a Model and of an op
  // called without a trainer.
  static ThreadPool& serial();

  // How long a worker spins for the next job before it sleeps.
  static constexpr int kSpinMicros = 50;

 private:
  using TaskFn = void (*)(void* ctx, int64_t task, int thread);
  void run_erased(int64_t tasks, TaskFn fn, void* ctx);
  void worker(int index);
  void work(int thread);  // takes tasks of the current job until none are left

  int threads_ = 1;
  std::vector<std::thread> workers_;
  std::vector<int> cpus_;  // thread t's CPU is cpus_[t % size]; empty: not pinned
  bool restore_mask_ = false;
  std::vector<unsigned char> caller_mask_;  // the caller's affinity mask (cpu_set_t bytes)

  // The current job: set while the generation is odd (closed), published by making it even.
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t tasks_ = 0;
  alignas(64) std::atomic<int64_t> next_{0};  // the next task index to take
  // (generation << 32) | workers inside the job. Even generation: the job is open.
  alignas(64) std::atomic<uint64_t> state_{1ull << 32};
  alignas(64) std::atomic<uint32_t> completed_{0};  // tasks of the job done (a futex word)
  alignas(64) std::atomic<uint32_t> wake_{0};       // bumped per job (the workers' futex word)
  std::atomic<int> sleepers_{0};                    // workers asleep on wake_ (wake only when > 0)
  std::atomic<int> caller_waits_{0};                // 1 while the caller sleeps on completed_
  std::atomic<bool> stop_{false};
};

// The thread index of the calling thread within the pool whose task it runs (0 outside any).
int current_thread_index();

}  // namespace dltune::engine
