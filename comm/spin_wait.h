// SpinWait: the polling policy of every shared-memory wait (the segment barrier, the
// small-message allreduce). Busy-polling is the lowest-latency wait when every rank has a core
// of its own, and a disaster when ranks outnumber cores (4 ranks on 2 cores: the peer we wait
// for may need our core to run). So: poll with the CPU's pause hint for a while (long when the
// node-local group fits on the machine's CPUs, a few polls when it does not), then yield the
// core on every poll, and after a millisecond of that sleep between polls, a sixteenth of the
// time waited (10 to 250 us). The clock is read only every few thousand pauses or few dozen
// yields (a clock read costs about as much as a pause on the machines we measured), and on
// every poll of the sleep phase (nothing beside a sleep).
//
//   SpinWait spin(local_size);
//   while (!ready()) {
//     if (!spin.wait(deadline)) return timeout_error("... in time");
//   }
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>

#include <sched.h>
#include <unistd.h>

#include "comm/communicator.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace dltune::comm {

class SpinWait {
 public:
  // `ranks`: how many ranks of this node take part (compared with the online CPUs to decide
  // how long to busy-poll before yielding).
  explicit SpinWait(int ranks) : spin_limit_(ranks > online_cpus() ? kShortSpins : kLongSpins) {}

  // A wait whose spin phase is `spin_polls` polls (a caller whose poll is itself costly, such
  // as MPI_Testall, counts its own).
  static SpinWait with_spins(uint64_t spin_polls) {
    SpinWait w(1);
    w.spin_limit_ = spin_polls;
    return w;
  }

  // One failed poll: pauses the CPU or yields the core. Returns false once `deadline` has
  // passed (noticed within a few thousand polls), true otherwise.
  bool wait(Deadline deadline) {
    ++polls_;
    if (polls_ < spin_limit_) {
      cpu_relax();
      return (polls_ & 4095) != 0 || Clock::now() <= deadline;
    }
    if (sleeping_) {
      // The clock costs nothing beside a sleep: read it every poll to size the nap.
      const Clock::time_point now = Clock::now();
      nap(now - yield_since_);
      return now <= deadline;
    }
    sched_yield();
    if ((polls_ & 63) != 0) return true;
    const Clock::time_point now = Clock::now();
    sleeping_ = waited_long(&yield_since_, now);
    return now <= deadline;
  }

  // After this long in the yield phase a wait sleeps between polls (nap()) instead: a thread
  // that only yields still takes most of a core it shares with the rank it waits for (CFS
  // runs it again at once), and ranks can outnumber cores without the node-local count
  // showing it (network-namespace nodes on one machine: a leader spinning in MPI_Testall took
  // a whole core of two from three computing ranks). A wait that is already this long loses
  // at most one nap, a few percent.
  static constexpr std::chrono::microseconds kYieldPhase{1000};

  // The sleep phase's nap between polls: a sixteenth of the time waited so far, between these
  // bounds. A wait loses at most about 6 % to its last nap, and a long one (a peer computing
  // on a core this rank shares: tens of milliseconds) polls a few thousand times a second
  // instead of 50,000: every poll is a wake-up and a context switch taken from the ranks that
  // compute. request.cc's waits use the same rule.
  static constexpr std::chrono::microseconds kMinNap{10};
  static constexpr std::chrono::microseconds kMaxNap{250};
  static std::chrono::microseconds nap_for(Clock::duration waited) {
    return std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(waited / 16), kMinNap,
                      kMaxNap);
  }

  // CPUs online on this machine (cached; at least 1).
  static int online_cpus() {
    static const int n = [] {
      const long v = sysconf(_SC_NPROCESSORS_ONLN);
      return v > 0 ? static_cast<int>(v) : 1;
    }();
    return n;
  }

  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }

 private:
  // Whether the yield phase that began at *since (set at the first call) has lasted
  // kYieldPhase by `now`.
  static bool waited_long(Clock::time_point* since, Clock::time_point now) {
    if (*since == Clock::time_point{}) *since = now;
    return now - *since >= kYieldPhase;
  }

  // One poll interval of the sleep phase (nap_for()); `waited`: since the yield phase began.
  static void nap(Clock::duration waited) {
    const timespec ts{0, static_cast<long>(nap_for(waited).count() * 1000)};
    nanosleep(&ts, nullptr);
  }

  // About 40 ns per pause here: ~180 us of polling with cores to spare, ~1 us when
  // oversubscribed (less than one sched_yield, ~1.5 us in this VM).
  static constexpr uint64_t kLongSpins = 4096;
  static constexpr uint64_t kShortSpins = 24;

  uint64_t spin_limit_;
  uint64_t polls_ = 0;
  bool sleeping_ = false;
  Clock::time_point yield_since_{};
};

}  // namespace dltune::comm
