// Requests: handles on operations that finish later (collectives queued on a communication
// thread, non-blocking point-to-point), and waiting for one, any or all of them.
//
//   std::vector<comm::Request> reqs = {c.irecv(prev, 1, act, n), c.irecv(next, 2, grad, n)};
//   for (int left = 2; left > 0; --left) {
//     auto i = comm::wait_any(reqs, c.deadline_from_now());   // whichever arrives first
//     if (!i) return i.error();
//     ... use the buffer of request *i; reqs[*i] is now invalid ...
//   }
//
// How a wait waits: an operation completed by another thread (a thread-communicator message,
// a collective on the communication thread) wakes its waiters through a condition variable:
// no polling. An operation that progresses only when polled (MPI_Test, cudaEventQuery) is
// polled: spinning briefly, then yielding the core, then, after 1 ms without completion,
// sleeping between polls for 1/16 of the time waited so far (10 us to 250 us). A long wait
// therefore costs almost no CPU (ranks may outnumber cores), and a sleep adds at most ~6 % to
// the latency of a message that arrives during it.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>

#include "common/result.h"

namespace dltune::comm {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// A handle on a non-blocking operation. Copyable (shared state): copies refer to the same
// operation. Default-constructed handles are invalid.
class Request {
 public:
  Request() = default;
  bool valid() const { return state_ != nullptr; }
  // Blocks until the operation finished and returns its status (its own error: kTimeout at
  // the operation's deadline, invalid input for a size mismatch, ...). May be called more
  // than once. Precondition: valid().
  Status wait();
  // Drives the operation once (a poll for transports that need one) and returns whether it
  // finished (wait() then returns without blocking). Never blocks. Precondition: valid().
  bool test() const;

  // A request that has already finished with `status` (e.g. an operation rejected before it
  // started).
  static Request finished(Status status);

  struct State;  // comm/request_state.h, for transports
  explicit Request(std::shared_ptr<State> state) : state_(std::move(state)) {}
  State* state() const { return state_.get(); }

 private:
  std::shared_ptr<State> state_;
};

// Blocks until at least one valid request of `requests` finished or `deadline` passed.
// Returns the index of a finished request (the lowest such index) and resets that element to
// an invalid Request, so that calling wait_any again on the same span waits for another one.
// Invalid elements are skipped.
// Errors: the finished operation's own error (its element is reset too), prefixed with
// "request I"; kTimeout when none finished by `deadline` (nothing is reset and the operations
// stay pending); invalid input when no element is valid.
Result<size_t> wait_any(std::span<Request> requests, Deadline deadline);

// Waits for every valid request (each until its operation's own deadline) and returns OK, or
// the error of the lowest-indexed request that failed, prefixed with "request I", after all
// finished. The requests stay valid (their wait() returns at once).
Status wait_all(std::span<Request> requests);

}  // namespace dltune::comm
