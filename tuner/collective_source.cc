#include "tuner/collective_source.h"

#include <algorithm>
#include <cmath>

#include "comm/allreduce.h"
#include "common/log.h"
#include "common/strings.h"

namespace dltune::tuner {
namespace {

Status check_size(uint64_t bytes, uint64_t max_bytes) {
  if (bytes < 4 || bytes % 4 != 0 || bytes > max_bytes) {
    return invalid_input("message size " + std::to_string(bytes) +
                         " B must be a positive multiple of 4 of at most " +
                         strings::format_bytes(max_bytes));
  }
  return ok_status();
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr uint64_t kMaxSegment = uint64_t{1} << 30;

}  // namespace

Result<CollectiveCandidate> parse_candidate(const std::string& name) {
  CollectiveCandidate c;
  const size_t slash = name.find('/');
  auto algo = comm::parse_algorithm(name.substr(0, slash));
  if (!algo) return std::move(algo).error().wrap("candidate '" + name + "'");
  c.algo = *algo;
  if (slash == std::string::npos) return c;
  if (c.algo != comm::Algorithm::kRing && c.algo != comm::Algorithm::kHierarchical) {
    return invalid_input("candidate '" + name +
                         "': only ring and hier take a segment size (ring/BYTES, hier/BYTES: the "
                         "ring among nodes)");
  }
  auto seg = strings::parse_int(name.substr(slash + 1));
  if (!seg || *seg <= 0 || static_cast<uint64_t>(*seg) > kMaxSegment) {
    return invalid_input("candidate '" + name +
                         "': the segment size must be a positive number of bytes up to 1 GiB");
  }
  c.segment_bytes = static_cast<uint64_t>(*seg);
  return c;
}

std::string candidate_name(const CollectiveCandidate& c) {
  std::string name(comm::algorithm_name(c.algo));
  if ((c.algo == comm::Algorithm::kRing || c.algo == comm::Algorithm::kHierarchical) &&
      c.segment_bytes > 0) {
    name += "/" + std::to_string(c.segment_bytes);
  }
  return name;
}

std::vector<std::string> default_candidates(int nodes, bool with_native) {
  std::vector<std::string> out = {"ring", "ring/262144",  "ring/1048576",
                                  "rd",   "rabenseifner", "tree"};
  // Across nodes, hierarchical with a plain and a segmented ring among nodes: on 4 simulated
  // nodes x 2 ranks at 1 Gbit/s the segments made the flat ring 14 % faster at 16 MiB.
  if (nodes > 1) {
    out.push_back("hier");
    out.push_back("hier/262144");
  } else {
    out.push_back("shm");
    out.push_back("cma");
  }
  if (with_native) out.push_back("native");
  return out;
}

MeasureOptions SourceOptions::default_measure_options() {
  MeasureOptions o;
  o.warmup_rounds = 1;  // calibration already ran every candidate twice
  o.min_rounds = 7;
  o.max_rounds = 30;
  o.target_rel_ci = 0.03;
  o.max_cost_s = 20;
  o.trial_timeout_s = 10;  // per call: a 256 MiB allreduce takes well under a second here
  return o;
}

struct CommCollectiveSource::Prepared {
  std::string name;
  CollectiveCandidate cand;
  const CustomCall* custom = nullptr;
  int iters = 1;
  std::string failure;  // non-empty: fails without running
};

CommCollectiveSource::CommCollectiveSource(comm::Communicator& comm, comm::SharedBuffer buf,
                                           SourceOptions o)
    : comm_(comm), buf_(std::move(buf)), options_(std::move(o)), start_(Clock::now()) {}

Result<std::unique_ptr<CommCollectiveSource>> CommCollectiveSource::create(comm::Communicator& comm,
                                                                           uint64_t max_bytes,
                                                                           SourceOptions options) {
  if (max_bytes < 4) return invalid_input("the largest message must be at least 4 bytes");
  for (const auto& [name, call] : options.custom) {
    auto c = parse_candidate(name);
    if (!c) return std::move(c).error().wrap("custom candidate");
    if (!call) return invalid_input("custom candidate '" + name + "' has no body");
  }
  auto buf = comm.alloc_shared(max_bytes);
  if (!buf) {
    return std::move(buf).error().wrap("allocating the " + strings::format_bytes(max_bytes) +
                                       " tuning buffer");
  }
  return std::unique_ptr<CommCollectiveSource>(
      new CommCollectiveSource(comm, std::move(*buf), std::move(options)));
}

void CommCollectiveSource::reset_budget(double budget_s) {
  options_.budget_s = budget_s;
  budget_exhausted_ = false;
  start_ = Clock::now();
}

Status CommCollectiveSource::agree_max(std::vector<double>& values) {
  comm::AllreduceOptions o;
  o.algorithm = comm::Algorithm::kRecursiveDoubling;
  o.timeout = options_.call_timeout;
  Status s = comm::allreduce(comm_, values.data(), values.data(), values.size(),
                             comm::DataType::kF64, comm::ReduceOp::kMax, o);
  if (!s.ok()) {
    fatal_ = s.error().wrap("agreeing on measurements with the other ranks");
    return fatal_;
  }
  return ok_status();
}

Status CommCollectiveSource::call_once(const Prepared& p, size_t count) {
  float* buf = buf_.as<float>();
  if (p.custom != nullptr) return (*p.custom)(comm_, buf, count);
  comm::AllreduceOptions o;
  o.algorithm = p.cand.algo;
  o.segment_bytes = p.cand.segment_bytes;
  o.timeout = options_.call_timeout;
  return comm::allreduce(comm_, buf, buf, count, comm::DataType::kF32, comm::ReduceOp::kSum, o);
}

// Runs every candidate twice (warm-up, then timed) and agrees on how many calls make a trial
// of about sample_ms, and on which candidates fail, so that all ranks run identical trials.
// Each candidate's agreement carries the budget check too: past the budget, every rank stops
// after the same candidate (kTimeout).
Result<std::vector<CommCollectiveSource::Prepared>> CommCollectiveSource::prepare(
    uint64_t bytes, const std::vector<std::string>& algos) {
  const size_t count = bytes / 4;
  std::vector<Prepared> out(algos.size());
  for (size_t i = 0; i < algos.size(); ++i) {
    Prepared& p = out[i];
    p.name = algos[i];
    double once_s = 0;
    auto c = parse_candidate(algos[i]);
    if (!c) {
      p.failure = c.error().message();
    } else {
      p.cand = *c;
      if (auto it = options_.custom.find(algos[i]); it != options_.custom.end()) {
        p.custom = &it->second;
      }
      Status s = call_once(p, count);
      const auto t0 = Clock::now();
      if (s.ok()) s = call_once(p, count);
      once_s = seconds_since(t0);
      if (!s.ok()) p.failure = s.error().message();
    }
    std::vector<double> agreed{once_s, p.failure.empty() ? 0.0 : 1.0, seconds_since(start_)};
    DLTUNE_TRY(agree_max(agreed));
    if (agreed[1] > 0 && p.failure.empty()) p.failure = "failed on another rank";
    const double once_ms = std::max(agreed[0] * 1e3, 1e-5);
    p.iters = static_cast<int>(std::clamp(options_.sample_ms / once_ms, 1.0, 20000.0));
    if (past_budget(agreed[2])) return budget_spent();
  }
  return out;
}

bool CommCollectiveSource::past_budget(double agreed_elapsed_s) {
  agreed_elapsed_s_ = agreed_elapsed_s;
  if (options_.budget_s > 0 && agreed_elapsed_s >= options_.budget_s) budget_exhausted_ = true;
  return budget_exhausted_;
}

Error CommCollectiveSource::budget_spent() const {
  return timeout_error("the tuning budget of " + std::to_string(options_.budget_s) + " s is spent");
}

Result<double> CommCollectiveSource::run_trial(const Prepared& p, size_t count) {
  if (!fatal_.ok()) return fatal_.error();
  if (!p.failure.empty()) return peer_failed(p.failure);
  // No separate barrier: every trial (and prepare()) ends with an allreduce, which the ranks
  // leave together, so the next trial starts synchronised.
  std::string failure;
  const auto t0 = Clock::now();
  for (int k = 0; k < p.iters; ++k) {
    if (Status s = call_once(p, count); !s.ok()) {
      failure = s.error().message();
      break;
    }
  }
  std::vector<double> agreed{seconds_since(t0) / p.iters, failure.empty() ? 0.0 : 1.0,
                             seconds_since(start_)};
  DLTUNE_TRY(agree_max(agreed));
  past_budget(agreed[2]);  // the measure loop's stop hook reads it after this trial
  if (agreed[1] > 0) return peer_failed(failure.empty() ? "failed on another rank" : failure);
  return agreed[0];
}

Status CommCollectiveSource::ready_for(uint64_t bytes) const {
  DLTUNE_TRY(check_size(bytes, buf_.bytes()));
  if (!fatal_.ok()) return fatal_;
  if (budget_exhausted_) return budget_spent();
  return ok_status();
}

Status CommCollectiveSource::warm_up(uint64_t bytes, const std::vector<std::string>& algos) {
  DLTUNE_TRY(ready_for(bytes));
  auto prepared = prepare(bytes, algos);  // two calls of each, failures agreed and kept
  if (!prepared) return std::move(prepared).error();
  return ok_status();
}

Result<Comparison> CommCollectiveSource::measure(uint64_t bytes,
                                                 const std::vector<std::string>& algos) {
  DLTUNE_TRY(ready_for(bytes));
  const auto t0 = Clock::now();
  std::vector<double> elapsed{seconds_since(start_)};
  DLTUNE_TRY(agree_max(elapsed));
  if (past_budget(elapsed[0])) return budget_spent();
  auto prepared = prepare(bytes, algos);
  if (!prepared) return std::move(prepared).error();
  std::vector<Candidate> cands;
  for (const Prepared& p : *prepared) {
    cands.push_back({p.name, [this, &p, bytes] { return run_trial(p, bytes / 4); }});
  }
  MeasureOptions mo = options_.measure;
  mo.stop = [this] { return budget_exhausted_; };  // agreed in run_trial: same on every rank
  if (options_.budget_s > 0 && options_.budget_share > 0)
    mo.max_cost_s = std::min(mo.max_cost_s, options_.budget_s * options_.budget_share);
  Comparison cmp = measure_interleaved(cands, mo);
  if (!fatal_.ok()) return fatal_.error();
  std::vector<double> cost{seconds_since(t0), seconds_since(start_)};
  DLTUNE_TRY(agree_max(cost));
  cmp.cost_s = cost[0];
  agreed_elapsed_s_ = cost[1];
  if (cmp.stopped && cmp.rounds < kMinRoundsWhenStopped) return budget_spent();
  DLTUNE_LOG(kDebug, "tuner") << "measured " << algos.size() << " candidates at " << bytes
                              << " B in " << cmp.rounds << " rounds, " << cmp.cost_s << " s";
  records_.push_back({bytes, cmp, phase_});
  return cmp;
}

}  // namespace dltune::tuner
