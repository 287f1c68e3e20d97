// The allreduce sweep behind `dltune bench` and bench/allreduce: every candidate algorithm at
// every message size, measured interleaved in time (round-robin within a size, rotating the
// order each round) because this machine's cores switch into slow phases for seconds at a time;
// plus, in the same rounds, the lower bounds: an alpha-beta bound from a ping-pong, a
// memory-bandwidth bound from a concurrent copy of the same size on every rank, and (2 ranks,
// small sizes) the line exchange: the small shm allreduce's own transfers with nothing else.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/types.h"
#include "common/result.h"

namespace dltune::comm {

struct SweepOptions {
  std::vector<Algorithm> algorithms;  // candidates; kShm is skipped on several nodes
  size_t min_bytes = 4;
  size_t max_bytes = size_t{256} << 20;
  int rounds = 11;        // samples per candidate per size (at least 3)
  double round_ms = 2.0;  // each sample repeats the call until it lasts about this long
  size_t segment_bytes = size_t{1} << 20;  // ring segment
};

struct SweepPoint {
  size_t bytes = 0;
  Algorithm algo = Algorithm::kRing;
  double median_us = 0, p10_us = 0, p90_us = 0;
  double busbw_gbs = 0;
  std::vector<double> samples_us;  // one per round, slowest rank's time
};

struct SweepBound {
  size_t bytes = 0;
  double alpha_beta_us = 0;  // ceil(log2 p) * alpha + 2 (p-1)/p * bytes / ping-pong bandwidth
  // A concurrent copy of `bytes` on every rank: the best round, as STREAM reports (a bound is
  // what the machine can do; a median would include rounds slowed by other candidates, e.g.
  // Open MPI's native allreduce remapping its temporary on every call).
  double membw_us = 0;
  double pingpong_us = 0;  // half round trip of an 8-byte message, measured in these rounds
  // The line exchange (2 ranks on one node, bytes <= 4 KiB; 0 otherwise): ranks 0 and 1 swap
  // `bytes` through node-shared memory in tagged cache lines (comm/shm_lines.h), the transfers
  // of the small shm allreduce with nothing else; median of the rounds.
  double exchange_us = 0;
};

struct SweepReport {
  int ranks = 0;
  int nodes = 0;
  double alpha_us = 0;      // 8-byte ping-pong half round trip (median, whole run)
  double pingpong_gbs = 0;  // 4 MiB ping-pong bandwidth
  std::vector<SweepPoint> results;
  std::vector<SweepBound> bounds;
  // The fastest candidate (by median) at `bytes` among `among` (all when empty).
  const SweepPoint* best(size_t bytes, const std::vector<Algorithm>& among = {}) const;
  const SweepPoint* find(size_t bytes, Algorithm algo) const;
  const SweepBound* bound(size_t bytes) const;
  // Median over rounds of a.sample / b.sample (paired ratio: same time window).
  static double paired_ratio(const SweepPoint& a, const SweepPoint& b);
};

// Collective over `comm`: runs the sweep (sizes: powers of two from min_bytes to max_bytes,
// f32 sum in place on a node-shared buffer). Results are identical on every rank.
// Errors: invalid input for bad sizes or an empty list; any collective's error.
Result<SweepReport> run_sweep(Communicator& comm, const SweepOptions& options);

// A readable table: per size, each algorithm's median (p10-p90), algbw and busbw, the bounds
// and the best algorithm.
std::string format_table(const SweepReport& report);
// DESIGN.md's JSON: {"ranks","nodes","results":[...],"bounds":[...]}; a bound also carries
// "exchange_us" where the line exchange was measured.
std::string format_json(const SweepReport& report);

}  // namespace dltune::comm
