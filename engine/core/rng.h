// A small, fully serialisable random generator (splitmix64), so that checkpoints can store the
// exact RNG state and every stream is reproducible from a seed.
#pragma once

#include <cmath>
#include <cstdint>

namespace dltune::engine {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  // Derives an independent seed from several values (seed, epoch, rank ...).
  static uint64_t mix(uint64_t a, uint64_t b) {
    Rng r(a ^ (b * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull));
    r.next();
    return r.next();
  }

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n), n > 0.
  uint64_t below(uint64_t n) { return next() % n; }
  // Standard normal (Box-Muller).
  float normal() {
    float u1 = uniform(), u2 = uniform();
    if (u1 < 1e-7f) u1 = 1e-7f;
    return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
  }

  uint64_t state() const { return state_; }
  void set_state(uint64_t s) { state_ = s; }

 private:
  uint64_t state_;
};

}  // namespace dltune::engine
