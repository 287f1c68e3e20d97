// The order in which a process's children die, independent of when its main loop reaps them.
//
// When a rank exits, its peers soon fail too (their fence breaks) and exit. If the supervisor's
// loop is scheduled late, it reaps all of them in one sweep, and waitpid() returns them in pid
// order, not in the order they died: the report could then name a peer that died *of* the
// failure instead of the rank that caused it. DeathOrder runs one thread blocked in
// waitid(WNOWAIT), which wakes at each child's death and notes it without reaping, so the
// supervisor can order the ranks it reaped in one sweep by when they died.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include <sys/types.h>

namespace dltune::launcher {

class DeathOrder {
 public:
  // Starts the watcher. The calling thread's signal mask is inherited; the watcher unblocks
  // only its private wake-up signal.
  DeathOrder();
  // Stops and joins the watcher (never blocks on children that are still alive).
  ~DeathOrder();
  DeathOrder(const DeathOrder&) = delete;
  DeathOrder& operator=(const DeathOrder&) = delete;

  // Tells the watcher that `pid` was reaped, so it may look for the next death.
  void reaped(pid_t pid);
  // Position of `pid` among the deaths seen so far (0 = first), or SIZE_MAX if not seen.
  size_t position(pid_t pid) const;

 private:
  void loop();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<pid_t> order_;
  std::unordered_set<pid_t> reaped_;
  bool stop_ = false;
  std::atomic<bool> exited_{false};
  std::thread thread_;
};

}  // namespace dltune::launcher
