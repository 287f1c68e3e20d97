// A deterministic synthetic CollectiveSource for search tests: each algorithm follows an
// alpha-beta model with a cache knee, and the machine has "slow phases" that multiply every
// candidate's time in a round (as the real machine's cross-core phases do), plus small
// per-trial jitter. Seeded, so every run of a test sees the same numbers. Time is synthetic:
// spent_s() sums every trial's time, and an optional budget on it is checked after every trial
// as CommCollectiveSource checks its wall-clock budget (search.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>

#include "tuner/search.h"

namespace dltune::tuner::testing {

struct SyntheticAlgo {
  double alpha_s;
  double bw_bytes_per_s;  // below the knee
  double bw_after_knee;   // at and above knee_bytes
  double knee_bytes = 32.0 * (1 << 20);
  double dip_bytes = 0;   // one size where the time is dip_factor times the line's (a dip
  double dip_factor = 1;  // or spike of a network stack: a protocol switch, a TCP window)
  double true_time(double n) const {
    const double bw = n >= knee_bytes ? bw_after_knee : bw_bytes_per_s;
    return (alpha_s + n / bw) * (n == dip_bytes ? dip_factor : 1.0);
  }
};

// Two ranks on this kind of machine, roughly: rd wins small, shm wins large, native loses
// above 16 MiB (the per-call malloc), tree and rabenseifner win nowhere by much.
inline std::map<std::string, SyntheticAlgo> two_rank_algos() {
  return {
      {"rd", {0.45e-6, 2.5e9, 1.8e9}},
      {"ring", {1.6e-6, 5.0e9, 3.0e9}},
      {"rabenseifner", {1.4e-6, 4.8e9, 2.9e9}},
      {"tree", {0.7e-6, 2.2e9, 1.6e9}},
      {"native", {0.5e-6, 3.0e9, 1.2e9, 16.0 * (1 << 20)}},
      {"shm", {0.9e-6, 7.0e9, 6.0e9}},
  };
}

// A harder machine: the shared-memory path falls off a cliff above 32 MiB (say, the segment
// no longer fits in huge pages), so ring overtakes it at 64 MiB -- a crossover far above the
// sizes the model-based search probes, which it must still find.
inline std::map<std::string, SyntheticAlgo> cliff_algos() {
  auto a = two_rank_algos();
  a["shm"].bw_after_knee = 1.9e9;
  return a;
}

// This machine as seen in one run: shm wins clearly up to 128 MiB, then at 256 MiB (the
// largest size) its memory is paged out between calls and it takes 1.7x ring's time; the
// probes (<= 8 MiB) also rate rabenseifner next best, but above 32 MiB it is 1.5x ring's time.
// No size below the largest hints at either, so only measuring every algorithm at the largest
// size finds ring.
inline std::map<std::string, SyntheticAlgo> late_cliff_algos() {
  auto a = two_rank_algos();
  a["shm"].knee_bytes = 192.0 * (1 << 20);
  a["shm"].bw_after_knee = 1.8e9;
  a["rabenseifner"].bw_after_knee = 2.0e9;
  return a;
}

// Times that are not smooth in the size, as across simulated nodes: tree, slow everywhere the
// probes look, is the fastest at 64 KiB alone (a dip between probes), and shm, the fastest
// everywhere else, is 3x slower at 512 KiB alone (a spike at a size its models call safe).
inline std::map<std::string, SyntheticAlgo> uneven_algos() {
  auto a = two_rank_algos();
  a["tree"].dip_bytes = 64.0 * 1024;
  a["tree"].dip_factor = 0.3;
  a["shm"].dip_bytes = 512.0 * 1024;
  a["shm"].dip_factor = 3.0;
  return a;
}

class SyntheticSource : public CollectiveSource {
 public:
  SyntheticSource(std::map<std::string, SyntheticAlgo> algos, unsigned seed,
                  double slow_phase_probability = 0.2)
      : algos_(std::move(algos)), rng_(seed), slow_p_(slow_phase_probability) {}

  Result<Comparison> measure(uint64_t bytes, const std::vector<std::string>& names) override {
    if (past_budget()) return timeout_error("the synthetic budget is spent");
    std::vector<Candidate> cands;
    for (const std::string& name : names) {
      const SyntheticAlgo* a = &algos_.at(name);
      const double n = static_cast<double>(bytes);
      cands.push_back({name, [this, a, n]() -> Result<double> {
                         const double t = a->true_time(n) * phase_factor() * jitter_(rng_);
                         spent_s_ += t;
                         longest_trial_s_ = std::max(longest_trial_s_, t);
                         return t;
                       }});
    }
    MeasureOptions o;
    o.max_rounds = 40;
    o.stop = [this] { return past_budget(); };
    Comparison cmp = measure_interleaved(cands, o);
    if (cmp.stopped && cmp.rounds < kMinRoundsWhenStopped) {
      return timeout_error("the synthetic budget is spent");
    }
    return cmp;
  }
  bool budget_exhausted() const override { return exhausted_; }

  void set_budget(double budget_s) { budget_s_ = budget_s; }
  double spent_s() const { return spent_s_; }
  double longest_trial_s() const { return longest_trial_s_; }

  double true_time(const std::string& algo, uint64_t bytes) const {
    return algos_.at(algo).true_time(static_cast<double>(bytes));
  }
  std::string oracle(uint64_t bytes) const {
    std::string best;
    double bt = INFINITY;
    for (const auto& [name, a] : algos_) {
      if (a.true_time(static_cast<double>(bytes)) < bt)
        bt = a.true_time(static_cast<double>(bytes)), best = name;
    }
    return best;
  }

 private:
  bool past_budget() {
    if (budget_s_ > 0 && spent_s_ >= budget_s_) exhausted_ = true;
    return exhausted_;
  }

  // The phase changes every few trials, so all candidates of a round mostly share it.
  double phase_factor() {
    if (++trials_in_phase_ >= 6) {
      trials_in_phase_ = 0;
      const double u = uniform_(rng_);
      phase_ = u < slow_p_ / 2 ? 5.0 : (u < slow_p_ ? 2.0 : 1.0);
    }
    return phase_;
  }

  std::map<std::string, SyntheticAlgo> algos_;
  std::mt19937_64 rng_;
  double slow_p_;
  std::lognormal_distribution<double> jitter_{0.0, 0.02};
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  double phase_ = 1.0;
  int trials_in_phase_ = 0;
  double budget_s_ = 0;  // 0 = none
  double spent_s_ = 0;
  double longest_trial_s_ = 0;
  bool exhausted_ = false;
};

inline std::vector<uint64_t> powers_of_two(uint64_t lo, uint64_t hi) {
  std::vector<uint64_t> v;
  for (uint64_t s = lo; s <= hi; s *= 2) v.push_back(s);
  return v;
}

}  // namespace dltune::tuner::testing
