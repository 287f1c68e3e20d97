// Internal to comm/: the shared state behind a Request, which each transport extends.
//
// Two kinds of operation:
// - pushed: another thread finishes it (finish()), e.g. the communication thread or a
//   thread-communicator sender; waiters sleep on condition variables.
// - polled (`polled` true): it progresses only when someone polls it (poll_locked(): MPI_Test,
//   cudaEventQuery); waiters poll it (see comm/request.h for the policy).
// Either kind may carry a deadline: once it passed, a waiter or test() calls expire_locked(),
// which cancels the operation and finishes it with kTimeout.
//
// Lock order: State::mu, then a transport's own locks (expire_locked() may take them), then a
// Waiter's mutex (finish_locked() signals waiters). A transport never holds its own lock while
// it calls finish().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "comm/request.h"

namespace dltune::comm {

namespace detail {
// Someone blocked in wait_any(): finish_locked() sets `signalled` and wakes it.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  bool signalled = false;
};
}  // namespace detail

struct Request::State {
  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  virtual ~State() = default;

  // Polled operations: called with `mu` held while !done; drives the operation once and calls
  // finish_locked() when it finished. Never blocks.
  virtual void poll_locked() {}
  // Called with `mu` held while !done, once `deadline` passed: cancels the operation and calls
  // finish_locked(timeout). May leave the request pending when its completion is already under
  // way in another thread (which then finishes it shortly).
  virtual void expire_locked();

  // Marks the operation finished with `s` (first call wins) and wakes every waiter.
  void finish(Status s) {
    std::lock_guard lock(mu);
    finish_locked(std::move(s));
  }
  void finish_locked(Status s);

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  bool polled = false;
  // Polled operations: polls a waiter spins (pausing the CPU) before it starts yielding.
  uint64_t spin_polls = 2000;
  Deadline deadline = Deadline::max();
  std::vector<detail::Waiter*> waiters;  // registered by wait_any(), under `mu`
};

}  // namespace dltune::comm
