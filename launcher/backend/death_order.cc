#include "launcher/backend/death_order.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>

#include <pthread.h>
#include <sys/wait.h>

namespace dltune::launcher {
namespace {

// A real-time signal nobody else in dltune uses, sent only to the watcher thread to get it out
// of waitid() when the supervisor is done.
int wake_signal() { return SIGRTMIN + 7; }

void ignore_wake(int) {}

}  // namespace

DeathOrder::DeathOrder() {
  struct sigaction sa {};
  sa.sa_handler = ignore_wake;  // no SA_RESTART: waitid() returns EINTR
  sigemptyset(&sa.sa_mask);
  sigaction(wake_signal(), &sa, nullptr);
  thread_ = std::thread([this] { loop(); });
}

DeathOrder::~DeathOrder() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // The signal may land just before the watcher enters waitid(); repeat until it has left.
  while (!exited_.load()) {
    pthread_kill(thread_.native_handle(), wake_signal());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  thread_.join();
}

void DeathOrder::loop() {
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, wake_signal());
  pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
    }
    siginfo_t info{};
    const int rc = waitid(P_ALL, 0, &info, WEXITED | WNOWAIT);
    std::unique_lock lock(mu_);
    if (stop_) break;
    if (rc != 0) {
      if (errno == ECHILD) cv_.wait_for(lock, std::chrono::milliseconds(20));  // none yet
      continue;
    }
    const pid_t pid = info.si_pid;
    if (std::find(order_.begin(), order_.end(), pid) == order_.end()) order_.push_back(pid);
    // Until the supervisor reaps it, waitid() would return this same child again at once.
    cv_.wait(lock, [&] { return stop_ || reaped_.count(pid) > 0; });
  }
  exited_.store(true);
}

void DeathOrder::reaped(pid_t pid) {
  {
    std::lock_guard lock(mu_);
    reaped_.insert(pid);
  }
  cv_.notify_all();
}

size_t DeathOrder::position(pid_t pid) const {
  std::lock_guard lock(mu_);
  const auto it = std::find(order_.begin(), order_.end(), pid);
  return it == order_.end() ? SIZE_MAX : static_cast<size_t>(it - order_.begin());
}

}  // namespace dltune::launcher
