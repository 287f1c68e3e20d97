#include "comm/bench_sweep.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "comm/allreduce.h"
#include "comm/registration.h"
#include "comm/shm_lines.h"
#include "common/strings.h"

namespace dltune::comm {
namespace {

constexpr int kTagPing = kReservedTagBase + 950;
// The per-size ping-pong runs up to this size, the line exchange up to the next.
constexpr size_t kPingMaxBytes = size_t{64} << 10;
constexpr size_t kExchangeMaxBytes = size_t{4} << 10;
static_assert(kExchangeMaxBytes <= kPingMaxBytes,
              "run_sweep: the exchange's samples follow the ping's");
// The ping-pong that gives the alpha-beta bound its bandwidth.
constexpr size_t kBandwidthBytes = size_t{4} << 20;
// The traffic bound's blocks, as the in-place shm allreduce's (comm/algo_shm.cc).
constexpr size_t kTrafficBlockBytes = 8192;

// The last-level cache's size as the CPU reports it (0 when unknown).
size_t last_level_cache_bytes() {
  for (int name : {_SC_LEVEL4_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long v = sysconf(name);
    if (v > 0) return static_cast<size_t>(v);
  }
  return 0;
}

double micros_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// The slowest rank's value of each element (every rank gets the same vector).
Status max_over_ranks(Communicator& comm, std::vector<double>& v) {
  AllreduceOptions o;
  o.algorithm = Algorithm::kRecursiveDoubling;
  return allreduce(comm, v.data(), v.data(), v.size(), DataType::kF64, ReduceOp::kMax, o);
}

Status sync(Communicator& comm) {
  float x = 0;
  AllreduceOptions o;
  o.algorithm = Algorithm::kRecursiveDoubling;
  return allreduce(comm, &x, &x, 1, DataType::kF32, ReduceOp::kSum, o);
}

// Half round trip between ranks 0 and 1 (others idle), in microseconds per iteration.
Status pingpong(Communicator& comm, void* buf, size_t bytes, int iters, double* us) {
  *us = 0;
  if (comm.size() < 2) return ok_status();
  const Deadline d = comm.deadline_from_now();
  DLTUNE_TRY(sync(comm));
  const auto t0 = Clock::now();
  for (int i = 0; i < iters && comm.rank() < 2; ++i) {
    if (comm.rank() == 0) {
      DLTUNE_TRY(comm.send(1, kTagPing, buf, bytes, d));
      DLTUNE_TRY(comm.recv(1, kTagPing, buf, bytes, d));
    } else {
      DLTUNE_TRY(comm.recv(0, kTagPing, buf, bytes, d));
      DLTUNE_TRY(comm.send(0, kTagPing, buf, bytes, d));
    }
  }
  *us = micros_since(t0) / iters / 2;
  return ok_status();
}

// One measured candidate: a real algorithm, or a pseudo-candidate for the bounds.
enum class Kind { kAlgo, kTraffic, kCopy, kPing, kExchange };
struct Candidate {
  Kind kind;
  Algorithm algo = Algorithm::kRing;
  Buffer buffer = Buffer::kShared;
};

struct Ctx {
  Communicator& comm;
  const SweepOptions& options;
  const SharedBuffer& shared;  // node-shared, max_bytes per local rank
  float* buf;                  // this rank's region of it
  float* priv;                 // private, max_bytes, pre-faulted (nullptr: not measured)
  float* reg;                  // private and registered, max_bytes (nullptr: not measured)
  uint8_t* copy;               // private, max_bytes (copy destination)
  uint8_t ping[8] = {};
  SharedBuffer lines{};    // the line exchange's two slots per rank (ranks 0 and 1)
  uint64_t lines_seq = 0;  // its calls so far
};

// The line exchange: ranks 0 and 1 swap `bytes` through node-shared memory in tagged cache
// lines (comm/shm_lines.h), each writing its slot of the call's parity and copying the peer's
// lines out as they arrive; other ranks idle. Nothing else happens: no reduction, no
// bookkeeping. It is the data movement of the small-message shm allreduce alone, so
// best / exchange says how much the algorithm adds to its own transfers; it is not a bound on
// every transfer pattern (from 4 KiB the barrier path's bulk reads beat it).
Status line_exchange(Ctx& c, size_t bytes) {
  const int me = c.comm.rank();
  if (me > 1) return ok_status();
  const uint64_t seq = ++c.lines_seq;
  const uint64_t tag = shm_lines::make_tag(seq, bytes);
  const size_t slot_bytes = shm_lines::lines_for(kExchangeMaxBytes) * shm_lines::kLineBytes;
  auto slot = [&](int r) {
    return static_cast<uint8_t*>(c.lines.peer(r)) + (seq & 1) * slot_bytes;
  };
  shm_lines::write(slot(me), c.copy, bytes, tag);
  uint8_t* theirs = slot(1 - me);
  const Deadline d = c.comm.deadline_from_now();
  SpinWait spin(2);
  uint64_t seen = 0;
  for (size_t l = 0; l < shm_lines::lines_for(bytes); ++l) {
    switch (shm_lines::await(theirs + l * shm_lines::kLineBytes, tag, d, spin, &seen)) {
      case shm_lines::Wait::kReady:
        break;
      case shm_lines::Wait::kOtherBytes:
        return internal_error("the line exchange's ranks disagree on the size");
      case shm_lines::Wait::kTimeout:
        return timeout_error("rank " + std::to_string(1 - me) +
                             " did not take part in the line exchange in time");
    }
    shm_lines::copy_line(c.copy + l * shm_lines::kLineData, theirs, l);
  }
  return ok_status();
}

// The traffic bound (SweepBound::membw_us): this local rank copies its 1/p slice of every
// local rank's region out to an L1-sized scratch and back, block by block: it reads `bytes`
// and writes `bytes`, the least any allreduce moves per rank, with no reduction and no
// synchronisation. Slices are cut on 64-byte lines as the shm allreduce cuts them.
void traffic(Ctx& c, size_t bytes) {
  Communicator& local = c.comm.local();
  const size_t p = static_cast<size_t>(local.size());
  const size_t me = static_cast<size_t>(local.rank());
  const size_t lines = (bytes + 63) / 64;
  const size_t lo = std::min(bytes, lines * me / p * 64);
  const size_t hi = std::min(bytes, lines * (me + 1) / p * 64);
  alignas(64) static thread_local uint8_t tmp[4][kTrafficBlockBytes];
  for (size_t b = lo; b < hi; b += kTrafficBlockBytes) {
    const size_t m = std::min(kTrafficBlockBytes, hi - b);
    for (size_t k0 = 0; k0 < p; k0 += 4) {  // up to four regions per pass, as L1 holds them
      const size_t k1 = std::min(p, k0 + 4);
      for (size_t k = k0; k < k1; ++k) {
        std::memcpy(tmp[k - k0], static_cast<uint8_t*>(c.shared.peer(static_cast<int>(k))) + b, m);
      }
      for (size_t k = k0; k < k1; ++k) {
        std::memcpy(static_cast<uint8_t*>(c.shared.peer(static_cast<int>(k))) + b, tmp[k - k0], m);
      }
    }
  }
}

Status run_once(Ctx& c, const Candidate& k, size_t bytes) {
  switch (k.kind) {
    case Kind::kTraffic:
      traffic(c, bytes);
      return ok_status();
    case Kind::kCopy:
      std::memcpy(c.copy, c.buf, bytes);
      return ok_status();
    case Kind::kPing: {  // one round trip between ranks 0 and 1, no synchronisation
      const Deadline d = c.comm.deadline_from_now();
      if (c.comm.rank() == 0) {
        DLTUNE_TRY(c.comm.send(1, kTagPing, c.ping, sizeof c.ping, d));
        return c.comm.recv(1, kTagPing, c.ping, sizeof c.ping, d);
      }
      if (c.comm.rank() == 1) {
        DLTUNE_TRY(c.comm.recv(0, kTagPing, c.ping, sizeof c.ping, d));
        return c.comm.send(0, kTagPing, c.ping, sizeof c.ping, d);
      }
      return ok_status();
    }
    case Kind::kExchange:
      return line_exchange(c, bytes);
    case Kind::kAlgo: {
      AllreduceOptions o;
      o.algorithm = k.algo;
      o.segment_bytes = c.options.segment_bytes;
      float* x = k.buffer == Buffer::kShared    ? c.buf
                 : k.buffer == Buffer::kPrivate ? c.priv
                                                : c.reg;
      return allreduce(c.comm, x, x, bytes / 4, DataType::kF32, ReduceOp::kSum, o);
    }
  }
  return ok_status();
}

// Measures every candidate at `bytes`, interleaved; out[i] gets candidate i's samples (us).
Status measure_size(Ctx& c, const std::vector<Candidate>& cands, size_t bytes,
                    std::vector<std::vector<double>>* out) {
  const size_t n = cands.size();
  // Calibrate: how many calls make a sample of about round_ms (the slowest rank decides).
  std::vector<double> once(n);
  for (size_t i = 0; i < n; ++i) {
    DLTUNE_TRY(run_once(c, cands[i], bytes));  // warm-up (first touch, scratch growth)
    DLTUNE_TRY(sync(c.comm));
    const auto t0 = Clock::now();
    DLTUNE_TRY(run_once(c, cands[i], bytes));
    once[i] = micros_since(t0);
  }
  DLTUNE_TRY(max_over_ranks(c.comm, once));
  std::vector<int> iters(n);
  for (size_t i = 0; i < n; ++i) {
    iters[i] = static_cast<int>(
        std::clamp(c.options.round_ms * 1000 / std::max(once[i], 0.01), 1.0, 20000.0));
  }
  const int rounds = std::max(3, c.options.rounds);
  std::vector<double> flat(n * static_cast<size_t>(rounds));
  for (int r = 0; r < rounds; ++r) {
    for (size_t j = 0; j < n; ++j) {
      const size_t i = (j + static_cast<size_t>(r)) % n;  // rotate the order every round
      DLTUNE_TRY(sync(c.comm));
      const auto t0 = Clock::now();
      for (int k = 0; k < iters[i]; ++k) DLTUNE_TRY(run_once(c, cands[i], bytes));
      flat[i * static_cast<size_t>(rounds) + static_cast<size_t>(r)] = micros_since(t0) / iters[i];
    }
  }
  DLTUNE_TRY(max_over_ranks(c.comm, flat));
  out->assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    (*out)[i].assign(flat.begin() + static_cast<long>(i) * rounds,
                     flat.begin() + static_cast<long>(i + 1) * rounds);
  }
  return ok_status();
}

// The requested algorithms that work here, on the node-shared buffer (shm and cma need one
// node; native needs the communicator's native allreduce), then again on a private buffer
// where asked. Error: none works.
Result<std::vector<Candidate>> working_algorithms(Communicator& comm, const SweepOptions& options,
                                                  int nodes) {
  std::vector<Candidate> algos;
  for (Algorithm a : options.algorithms) {
    if ((a == Algorithm::kShm || a == Algorithm::kCma) && nodes > 1) continue;
    if (a == Algorithm::kNative) {
      float x = 0;
      if (!comm.native_allreduce(&x, &x, 1, DataType::kF32, ReduceOp::kSum)) continue;
    }
    algos.push_back({Kind::kAlgo, a, Buffer::kShared});
  }
  if (algos.empty()) return invalid_input("none of the requested algorithms works here");
  if (options.private_buffers) {
    const size_t n = algos.size();
    for (size_t i = 0; i < n; ++i) algos.push_back({Kind::kAlgo, algos[i].algo, Buffer::kPrivate});
    for (size_t i = 0; i < n; ++i) {
      const Algorithm a = algos[i].algo;
      if (a == Algorithm::kCma || a == Algorithm::kNative) {
        algos.push_back({Kind::kAlgo, a, Buffer::kRegistered});
      }
    }
  }
  return algos;
}

// rep.alpha_us and rep.pingpong_gbs, the slowest rank's: alpha from 8-byte ping-pongs, the
// bandwidth for the alpha-beta bound always at kBandwidthBytes.
Status measure_pingpong(Ctx& c, SweepReport& rep) {
  DLTUNE_TRY(pingpong(c.comm, c.ping, 8, 200, &rep.alpha_us));  // warm-up
  DLTUNE_TRY(pingpong(c.comm, c.ping, 8, 2000, &rep.alpha_us));
  // Always at kBandwidthBytes, whatever the sweep's sizes: a ping-pong of a few bytes says
  // nothing about bandwidth (with --max-bytes 64 the bound at 64 B came out at 2.3x alpha).
  const size_t big = kBandwidthBytes;
  double big_us = 0;
  DLTUNE_TRY(pingpong(c.comm, c.copy, big, 10, &big_us));
  std::vector<double> ab{rep.alpha_us, big_us};
  DLTUNE_TRY(max_over_ranks(c.comm, ab));
  rep.alpha_us = ab[0];
  rep.pingpong_gbs = ab[1] > 0 ? static_cast<double>(big) / ab[1] / 1e3 : 0;
  return ok_status();
}

// What one size's samples say: a point per algorithm, then the bounds, from the
// pseudo-candidates after them (traffic, copy, then ping-pong if `ping`, exchange if `xchg`).
// `llc`: the last-level cache's bytes (0: unknown), shared by `local_ranks`.
void add_size(SweepReport& rep, const std::vector<Candidate>& algos,
              const std::vector<std::vector<double>>& samples, size_t bytes, bool ping, bool xchg,
              size_t llc, size_t local_ranks) {
  const double p = rep.ranks;
  for (size_t i = 0; i < algos.size(); ++i) {
    SweepPoint pt;
    pt.bytes = bytes, pt.algo = algos[i].algo, pt.buffer = algos[i].buffer;
    pt.samples_us = samples[i];
    pt.median_us = percentile(samples[i], 0.5);
    pt.p10_us = percentile(samples[i], 0.1);
    pt.p90_us = percentile(samples[i], 0.9);
    pt.busbw_gbs = p > 1 ? static_cast<double>(bytes) / pt.median_us / 1e3 * 2 * (p - 1) / p : 0;
    rep.results.push_back(std::move(pt));
  }
  SweepBound b;
  b.bytes = bytes;
  b.membw_us = percentile(samples[algos.size()], 0.0);  // the best round (bench_sweep.h)
  b.read_bytes = b.write_bytes = bytes;
  b.in_cache = llc > 0 && local_ranks * bytes <= llc;
  b.copy_us = percentile(samples[algos.size() + 1], 0.0);
  b.pingpong_us = ping ? percentile(samples[algos.size() + 2], 0.5) / 2 : rep.alpha_us;
  if (xchg) b.exchange_us = percentile(samples[algos.size() + 3], 0.5);
  const double steps = std::ceil(std::log2(std::max(p, 1.0)));
  b.alpha_beta_us = steps * b.pingpong_us +
                    (rep.pingpong_gbs > 0
                         ? 2 * (p - 1) / p * static_cast<double>(bytes) / (rep.pingpong_gbs * 1e3)
                         : 0);
  rep.bounds.push_back(b);
}

}  // namespace

const char* buffer_name(Buffer b) {
  switch (b) {
    case Buffer::kShared:
      return "shared";
    case Buffer::kPrivate:
      return "private";
    case Buffer::kRegistered:
      return "registered";
  }
  return "?";
}

const SweepPoint* SweepReport::find(size_t bytes, Algorithm algo, Buffer buffer) const {
  for (const auto& p : results) {
    if (p.bytes == bytes && p.algo == algo && p.buffer == buffer) return &p;
  }
  return nullptr;
}

const SweepPoint* SweepReport::best(size_t bytes, const std::vector<Algorithm>& among,
                                    Buffer buffer) const {
  const SweepPoint* b = nullptr;
  for (const auto& p : results) {
    if (p.bytes != bytes || p.buffer != buffer) continue;
    if (!among.empty() && std::find(among.begin(), among.end(), p.algo) == among.end()) continue;
    if (b == nullptr || p.median_us < b->median_us) b = &p;
  }
  return b;
}

const SweepBound* SweepReport::bound(size_t bytes) const {
  for (const auto& b : bounds) {
    if (b.bytes == bytes) return &b;
  }
  return nullptr;
}

double SweepReport::paired_ratio(const SweepPoint& a, const SweepPoint& b) {
  std::vector<double> r;
  for (size_t i = 0; i < std::min(a.samples_us.size(), b.samples_us.size()); ++i) {
    if (b.samples_us[i] > 0) r.push_back(a.samples_us[i] / b.samples_us[i]);
  }
  return percentile(r, 0.5);
}

Result<SweepReport> run_sweep(Communicator& comm, const SweepOptions& options) {
  if (options.algorithms.empty()) return invalid_input("no algorithm to measure");
  if (options.min_bytes < 4 || options.max_bytes < options.min_bytes) {
    return invalid_input("message sizes must satisfy 4 <= min-bytes <= max-bytes, got " +
                         std::to_string(options.min_bytes) + " and " +
                         std::to_string(options.max_bytes));
  }
  if (options.max_bytes > (size_t{1} << 30)) {
    return invalid_input("max-bytes is limited to 1 GiB, got " +
                         strings::format_bytes(options.max_bytes));
  }
  SweepReport rep;
  rep.ranks = comm.size();
  rep.nodes = comm.node_count();
  auto working = working_algorithms(comm, options, rep.nodes);
  if (!working) return working.error();
  std::vector<Candidate> algos = std::move(*working);

  auto shared = comm.alloc_shared(options.max_bytes);
  if (!shared) return shared.error();
  // Value-initialised: every page is touched (pre-faulted) before the first measurement.
  std::unique_ptr<float[]> priv, reg;
  Registration registration;
  if (options.private_buffers) priv.reset(new float[options.max_bytes / 4 + 1]());
  const bool registers = std::any_of(algos.begin(), algos.end(), [](const Candidate& k) {
    return k.buffer == Buffer::kRegistered;
  });
  if (registers) {
    reg.reset(new float[options.max_bytes / 4 + 1]());
    DLTUNE_TRY(sync(comm));
    const auto t0 = Clock::now();
    auto r = comm.register_memory(reg.get(), options.max_bytes);
    if (!r) return r.error();
    std::vector<double> us{micros_since(t0)};
    DLTUNE_TRY(max_over_ranks(comm, us));
    registration = std::move(*r);
    rep.register_us = us[0];
    if (!registration.active()) {
      rep.register_refused = registration.reason();
      std::erase_if(algos, [](const Candidate& k) { return k.buffer == Buffer::kRegistered; });
    }
  }
  // The copy destination is also the line exchange's source and destination, which copies
  // whole lines: up to kLineData - 1 bytes past the message.
  Ctx c{comm,
        options,
        *shared,
        shared->as<float>(),
        priv.get(),
        reg.get(),
        static_cast<uint8_t*>(
            comm.scratch(2, std::max(options.max_bytes, kBandwidthBytes) + shm_lines::kLineData))};
  const bool exchange = rep.ranks == 2 && rep.nodes == 1;
  if (exchange) {
    const size_t slot = shm_lines::lines_for(kExchangeMaxBytes) * shm_lines::kLineBytes;
    auto lines = comm.alloc_shared(2 * slot);
    if (!lines) return lines.error();
    c.lines = std::move(*lines);
  }
  // alpha and the ping-pong bandwidth for the alpha-beta bound.
  DLTUNE_TRY(measure_pingpong(c, rep));

  const size_t llc = last_level_cache_bytes();
  const size_t local_ranks = static_cast<size_t>(comm.local().size());
  for (size_t bytes = options.min_bytes / 4 * 4; bytes <= options.max_bytes; bytes *= 2) {
    std::vector<Candidate> cands = algos;
    cands.push_back({Kind::kTraffic});
    cands.push_back({Kind::kCopy});
    const bool ping = rep.ranks > 1 && bytes <= kPingMaxBytes;
    if (ping) cands.push_back({Kind::kPing});
    const bool xchg = exchange && bytes <= kExchangeMaxBytes;
    if (xchg) cands.push_back({Kind::kExchange});
    std::vector<std::vector<double>> samples;
    DLTUNE_TRY_CTX(measure_size(c, cands, bytes, &samples),
                   "measuring " + strings::format_bytes(bytes));
    add_size(rep, algos, samples, bytes, ping, xchg, llc, local_ranks);
    if (bytes > options.max_bytes / 2) break;  // no overflow past max
  }
  return rep;
}

std::string format_table(const SweepReport& rep) {
  std::ostringstream os;
  os << std::fixed;
  os << "allreduce f32 sum, in place, " << rep.ranks << " ranks on " << rep.nodes
     << " node(s); ping-pong alpha " << std::setprecision(2) << rep.alpha_us << " us, "
     << std::setprecision(1) << rep.pingpong_gbs << " GB/s\n";
  if (!rep.register_refused.empty()) {
    os << "registered buffers not measured: " << rep.register_refused << "\n";
  } else if (rep.register_us > 0) {
    os << "registered: each rank's private buffer of the largest size, registered once in "
       << std::setprecision(0) << rep.register_us
       << " us (its pages moved into memory the node's ranks share; cma and native measured "
          "on it as '(registered)')\n";
  }
  os << "bounds: alpha-beta = ceil(log2 p) alpha + 2(p-1)/p N / ping-pong bw; membw = the least "
        "traffic any allreduce moves, each rank reading N and writing N bytes (its 1/p of every "
        "rank's buffer), measured alone on the same warm node-shared buffer (best round); copy = "
        "a copy of N bytes on every rank, what this table used to call membw (no bound: it "
        "also reads its destination)";
  const size_t llc = last_level_cache_bytes();
  if (llc > 0) {
    os << "; 'in LLC': every local rank's N fits in the last-level cache the CPU reports ("
       << strings::format_bytes(llc) << "), so the bounds there measure cache, not memory";
  }
  if (!rep.bounds.empty() && rep.bounds.front().exchange_us > 0) {
    os << "; exchange = 2 ranks swapping N bytes in tagged cache lines, the small shm "
          "allreduce's transfers alone (up to "
       << strings::format_bytes(kExchangeMaxBytes) << ")";
  }
  os << "\n";
  size_t last = SIZE_MAX;
  for (const auto& pt : rep.results) {
    if (pt.bytes != last) {
      last = pt.bytes;
      const SweepBound* b = rep.bound(pt.bytes);
      const SweepPoint* best = rep.best(pt.bytes);
      const SweepPoint* best_private = rep.best(pt.bytes, {}, Buffer::kPrivate);
      os << "\n"
         << std::setw(10) << strings::format_bytes(pt.bytes) << "  bounds: alpha-beta "
         << std::setprecision(2) << (b ? b->alpha_beta_us : 0) << " us, membw "
         << (b ? b->membw_us : 0) << " us" << (b && b->in_cache ? " (in LLC)" : "") << ", copy "
         << (b ? b->copy_us : 0) << " us";
      if (b && b->exchange_us > 0) os << ", exchange " << b->exchange_us << " us";
      os << "; best: " << algorithm_name(best->algo);
      if (best_private) os << ", on a private buffer " << algorithm_name(best_private->algo);
      os << "\n";
      os << "    algo                   median_us    p10_us    p90_us  algbw_GB/s  busbw_GB/s\n";
    }
    const double algbw = static_cast<double>(pt.bytes) / pt.median_us / 1e3;
    const std::string name =
        std::string(algorithm_name(pt.algo)) +
        (pt.buffer == Buffer::kShared ? "" : std::string(" (") + buffer_name(pt.buffer) + ")");
    os << "    " << std::left << std::setw(21) << name << std::right << std::setprecision(2)
       << std::setw(11) << pt.median_us << std::setw(10) << pt.p10_us << std::setw(10) << pt.p90_us
       << std::setprecision(3) << std::setw(12) << algbw << std::setw(12) << pt.busbw_gbs << "\n";
  }
  return os.str();
}

std::string format_json(const SweepReport& rep) {
  nlohmann::json j;
  j["ranks"] = rep.ranks;
  j["nodes"] = rep.nodes;
  j["results"] = nlohmann::json::array();
  for (const auto& pt : rep.results) {
    j["results"].push_back({{"bytes", pt.bytes},
                            {"algo", std::string(algorithm_name(pt.algo))},
                            {"buffer", buffer_name(pt.buffer)},
                            {"median_us", pt.median_us},
                            {"p10_us", pt.p10_us},
                            {"p90_us", pt.p90_us},
                            {"busbw_gbs", pt.busbw_gbs},
                            {"samples_us", pt.samples_us}});
  }
  if (rep.register_us > 0) j["register_us"] = rep.register_us;
  if (!rep.register_refused.empty()) j["register_refused"] = rep.register_refused;
  j["bounds"] = nlohmann::json::array();
  for (const auto& b : rep.bounds) {
    nlohmann::json e = {
        {"bytes", b.bytes},           {"alpha_beta_us", b.alpha_beta_us}, {"membw_us", b.membw_us},
        {"read_bytes", b.read_bytes}, {"write_bytes", b.write_bytes},     {"in_cache", b.in_cache},
        {"copy_us", b.copy_us}};
    if (b.exchange_us > 0) e["exchange_us"] = b.exchange_us;
    j["bounds"].push_back(std::move(e));
  }
  return j.dump(1) + "\n";
}

}  // namespace dltune::comm
