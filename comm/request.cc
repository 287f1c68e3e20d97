// Requests: finishing, testing and waiting (the waiting policy is described in comm/request.h).
#include "comm/request.h"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>

#include "comm/request_state.h"
#include "comm/spin_wait.h"

namespace dltune::comm {
namespace {

constexpr auto kYieldFor = SpinWait::kYieldPhase;  // then sleep between polls
// A request whose deadline passed but whose completion is under way elsewhere is checked
// again this often.
constexpr auto kRecheck = std::chrono::milliseconds(1);

// One look at `s`: polls it when polled, expires it when its deadline passed. Returns done.
bool check(Request::State& s, Clock::time_point now) {
  std::lock_guard lock(s.mu);
  if (s.done) return true;
  if (s.polled) s.poll_locked();
  if (!s.done && now >= s.deadline) s.expire_locked();
  return s.done;
}

// Blocks until one of `states` is done (returns its position) or `deadline` passed (returns
// states.size()).
size_t wait_first(std::span<Request::State* const> states, Deadline deadline) {
  detail::Waiter w;
  bool any_polled = false;
  uint64_t spin = UINT64_MAX;
  for (Request::State* s : states) {
    std::lock_guard lock(s->mu);
    s->waiters.push_back(&w);
    if (s->polled) any_polled = true, spin = std::min(spin, s->spin_polls);
  }
  // Unregistered before `w` goes away: finish_locked() signals under the state's lock.
  struct Unregister {
    std::span<Request::State* const> states;
    detail::Waiter* w;
    ~Unregister() {
      for (Request::State* s : states) {
        std::lock_guard lock(s->mu);
        std::erase(s->waiters, w);
      }
    }
  } unregister{states, &w};

  const auto start = Clock::now();
  for (uint64_t polls = 0;; ++polls) {
    const auto now = Clock::now();
    Deadline wake = deadline;
    for (size_t i = 0; i < states.size(); ++i) {
      if (check(*states[i], now)) return i;
      const Deadline own = states[i]->deadline;  // immutable once posted
      wake = std::min(wake, own > now ? own : now + kRecheck);
    }
    if (now >= deadline) return states.size();
    if (any_polled) {
      if (polls < spin) {
        SpinWait::cpu_relax();
        continue;
      }
      const auto waited = now - start;
      if (waited < kYieldFor) {
        sched_yield();
        continue;
      }
      const auto nap = SpinWait::nap_for(waited);
      wake = std::min(wake, now + nap);
    }
    std::unique_lock lock(w.mu);
    w.cv.wait_until(lock, wake, [&] { return w.signalled; });
    w.signalled = false;
  }
}

}  // namespace

void Request::State::expire_locked() {
  finish_locked(timeout_error("the operation did not finish in time"));
}

void Request::State::finish_locked(Status s) {
  if (done) return;
  status = std::move(s);
  done = true;
  for (detail::Waiter* w : waiters) {
    std::lock_guard lock(w->mu);
    w->signalled = true;
    w->cv.notify_one();
  }
  cv.notify_all();
}

Request Request::finished(Status status) {
  auto s = std::make_shared<State>();
  s->finish(std::move(status));
  return Request(std::move(s));
}

Status Request::wait() {
  DLTUNE_CHECK(state_ != nullptr, "wait() on an invalid Request");
  State& s = *state_;
  if (!s.polled && s.deadline == Deadline::max()) {
    std::unique_lock lock(s.mu);  // pushed, no deadline: just sleep until finished
    s.cv.wait(lock, [&] { return s.done; });
    return s.status;
  }
  State* one[] = {&s};
  wait_first(one, Deadline::max());
  std::lock_guard lock(s.mu);
  return s.status;
}

bool Request::test() const {
  DLTUNE_CHECK(state_ != nullptr, "test() on an invalid Request");
  return check(*state_, Clock::now());
}

Result<size_t> wait_any(std::span<Request> requests, Deadline deadline) {
  std::vector<Request::State*> states;
  std::vector<size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].valid()) states.push_back(requests[i].state()), index.push_back(i);
  }
  if (states.empty()) {
    return invalid_input("wait_any() on " + std::to_string(requests.size()) +
                         " requests of which none is valid (all consumed already?)");
  }
  const size_t k = wait_first(states, deadline);
  if (k == states.size()) {
    return timeout_error("none of " + std::to_string(states.size()) +
                         " pending requests finished in time");
  }
  const size_t i = index[k];
  Status status = [&] {
    std::lock_guard lock(states[k]->mu);
    return states[k]->status;
  }();
  requests[i] = Request();
  if (!status) return std::move(status).error().wrap("request " + std::to_string(i));
  return i;
}

Status wait_all(std::span<Request> requests) {
  Status first;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!requests[i].valid()) continue;
    Status s = requests[i].wait();
    if (!s && first) first = std::move(s).error().wrap("request " + std::to_string(i));
  }
  return first;
}

}  // namespace dltune::comm
