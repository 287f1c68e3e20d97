// The allreduce sweep behind `dltune bench` and bench/allreduce: every candidate algorithm at
// every message size, measured interleaved in time (round-robin within a size, rotating the
// order each round) because this machine's cores switch into slow phases for seconds at a time;
// plus, in the same rounds, the lower bounds: an alpha-beta bound from a ping-pong, a
// memory-traffic bound (the least traffic any allreduce of the size must move, measured on the
// same warm buffers), and (2 ranks, small sizes) the line exchange: the small shm allreduce's
// own transfers with nothing else.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/types.h"
#include "common/result.h"

namespace dltune::comm {

// Where a candidate's buffer lives: in the node-shared segment (Communicator::alloc_shared,
// where the engine keeps its gradients so that the shm allreduce works in place), or in the
// rank's private memory, as an ordinary program holds its data (shm then stages it), or in
// private memory the program registered once (Communicator::register_memory, as NCCL's
// ncclCommRegister: the cma allreduce then reads and writes it directly).
enum class Buffer { kShared, kPrivate, kRegistered };
// "shared", "private", "registered".
const char* buffer_name(Buffer b);

struct SweepOptions {
  std::vector<Algorithm> algorithms;  // candidates; kShm and kCma are skipped on several nodes
  // Also measure every algorithm on a private buffer, as candidates of their own, and cma and
  // native on a registered private buffer (where the node's ranks may register memory).
  bool private_buffers = false;
  size_t min_bytes = 4;
  size_t max_bytes = size_t{256} << 20;
  int rounds = 11;        // samples per candidate per size (at least 3)
  double round_ms = 2.0;  // each sample repeats the call until it lasts about this long
  size_t segment_bytes = size_t{1} << 20;  // ring segment
};

struct SweepPoint {
  size_t bytes = 0;
  Algorithm algo = Algorithm::kRing;
  Buffer buffer = Buffer::kShared;
  double median_us = 0, p10_us = 0, p90_us = 0;
  double busbw_gbs = 0;
  std::vector<double> samples_us;  // one per round, slowest rank's time
};

struct SweepBound {
  size_t bytes = 0;
  double alpha_beta_us = 0;  // ceil(log2 p) * alpha + 2 (p-1)/p * bytes / ping-pong bandwidth
  // The memory-traffic bound. Any allreduce must read every rank's input once and write every
  // rank's output once: per rank at least read_bytes = write_bytes = `bytes` (its 1/p share of
  // each of the p buffers). Measured as exactly that traffic and nothing else: every local rank
  // copies its 1/p slice of every local rank's region of the node-shared buffer out to a small
  // scratch and back, block by block (the data movement of the in-place shm allreduce without
  // its reduction and barriers), concurrently, on the same pre-faulted buffer the candidates
  // use, warm since it is measured between them; the best round, as STREAM reports (a bound is
  // what the machine can do). On one node an algorithm can only beat it by moving less.
  double membw_us = 0;
  size_t read_bytes = 0, write_bytes = 0;  // per rank, as above
  // The local ranks' regions (local size x bytes) fit in the last-level cache as the CPU reports
  // it: the bound then measures that cache, not memory (a VM may report its host's cache).
  bool in_cache = false;
  // What this sweep used to call the bound: a concurrent copy of `bytes` from the shared buffer
  // to a private one on every rank, the best round. It is no bound: the copy also reads its
  // destination before writing it (write-allocate), 3N of traffic where the in-place shm
  // allreduce moves 2N per rank, which ran 1.2-1.7x faster than it. Kept for comparison.
  double copy_us = 0;
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
  // Registering the private buffer of max_bytes (slowest rank, us; 0 when not registered) and
  // why it was not, where the node refused it.
  double register_us = 0;
  std::string register_refused;
  // The fastest candidate (by median) at `bytes` on `buffer` among `among` (all when empty).
  const SweepPoint* best(size_t bytes, const std::vector<Algorithm>& among = {},
                         Buffer buffer = Buffer::kShared) const;
  const SweepPoint* find(size_t bytes, Algorithm algo, Buffer buffer = Buffer::kShared) const;
  const SweepBound* bound(size_t bytes) const;
  // Median over rounds of a.sample / b.sample (paired ratio: same time window).
  static double paired_ratio(const SweepPoint& a, const SweepPoint& b);
};

// Collective over `comm`: runs the sweep (sizes: powers of two from min_bytes to max_bytes,
// f32 sum in place on a node-shared buffer, and with private_buffers also on a private one of
// the same size, pre-faulted). Results are identical on every rank.
// Errors: invalid input for bad sizes or an empty list; any collective's error.
Result<SweepReport> run_sweep(Communicator& comm, const SweepOptions& options);

// A readable table: per size, each algorithm's median (p10-p90), algbw and busbw, the bounds
// and the best algorithm.
std::string format_table(const SweepReport& report);
// DESIGN.md's JSON: {"ranks","nodes","results":[...],"bounds":[...]}; a result also carries
// "buffer" ("shared", "private" or "registered") and "samples_us" (the slowest rank's time of each
// round, in round order); a bound carries "read_bytes", "write_bytes", "in_cache", "copy_us", and
// "exchange_us" where the line exchange was measured.
std::string format_json(const SweepReport& report);

}  // namespace dltune::comm
