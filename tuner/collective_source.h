// CommCollectiveSource: the real CollectiveSource (tuner/search.h). It measures allreduce
// candidates over a live Communicator, interleaved in time (tuner/measure.h), on every rank
// of the job at once.
//
// Every rank runs the same search over its own source, and the search's decisions (which
// candidates to measure next, when a comparison has converged, who won) depend only on the
// times the trials return. So each trial ends with an allreduce MAX of the trial's time (and
// of a failure flag) across the ranks: every rank sees the slowest rank's time, the same on
// all of them, and therefore takes the same decisions. The budget check is agreed the same
// way, in the same allreduce: the slowest rank's elapsed time, after every trial and every
// calibration, so every rank stops after the same trial and the budget is overrun by about
// one trial at most (search.h says what a stopped comparison yields). A candidate failing on any
// rank fails on all of them and the search goes on; an error of the agreement itself (a dead peer)
// ends the search.
//
// A candidate is named "ALGO" or "ring/SEGMENT" (comm/types.h's algorithm names; "ring" alone
// is the unsegmented ring, "ring/262144" the ring pipelined in 256 KiB segments).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/types.h"
#include "common/result.h"
#include "tuner/search.h"

namespace dltune::tuner {

// A parsed candidate name.
struct CollectiveCandidate {
  comm::Algorithm algo = comm::Algorithm::kRing;
  uint64_t segment_bytes = 0;  // ring only; 0 = unsegmented
};

// Parses "ring", "rd", ..., "ring/262144". Errors (invalid_input): an unknown algorithm, a
// segment on anything but ring, a segment that is not a positive integer of at most 1 GiB.
Result<CollectiveCandidate> parse_candidate(const std::string& name);
// The canonical name ("ring/262144"; "ring" when segment_bytes == 0).
std::string candidate_name(const CollectiveCandidate& c);

// The candidates worth measuring for a job of `nodes` nodes: ring unsegmented and in 256 KiB
// and 1 MiB segments, rd, rabenseifner, tree, and shm and cma on one node or hier across nodes
// (on one node hier is its inner shm phase plus a no-op, so it is left out); native when
// `with_native`.
std::vector<std::string> default_candidates(int nodes, bool with_native);

// A replacement body for a candidate (tests: make one algorithm artificially slow or failing).
// Runs one allreduce of `count` f32 in place on `buf`; its error fails the candidate.
using CustomCall = std::function<Status(comm::Communicator& comm, float* buf, size_t count)>;

struct SourceOptions {
  MeasureOptions measure = default_measure_options();
  double sample_ms = 2.0;  // a trial repeats the call until it lasts about this long
  double budget_s = 0;     // 0 = none; else no trial starts past this (see above)
  // Under a budget, the most one comparison may cost as a share of it (0: no cap but
  // measure.max_cost_s): tune_collectives gives each size an equal share, so that a slow or
  // lossy fabric, where a few rounds of the small sizes took 30 s each (4 namespace nodes at
  // 1 Gbit/s), cannot spend the budget before the large sizes are reached.
  double budget_share = 0;
  std::chrono::milliseconds call_timeout{60000};  // per collective call
  std::map<std::string, CustomCall> custom;       // candidate name -> replacement body

  // Interleaving defaults for collectives: a trial is a few ms, so rounds are capped by
  // count (the per-trial costs the measure loop sums are per call, not per trial).
  static MeasureOptions default_measure_options();
};

// One measure() call as it happened, for reports and the database.
struct SourceRecord {
  uint64_t bytes = 0;
  Comparison comparison;  // cost_s is the wall time of the whole call, all ranks agreed
  int phase = 0;          // the source's phase when it was measured (see set_phase)
};

class CommCollectiveSource final : public CollectiveSource {
 public:
  // Collective over `comm`: allocates a node-shared buffer of max_bytes (zero-filled, so that
  // repeated in-place sums stay 0 and never hit denormals). Errors: max_bytes < 4, shared
  // memory that cannot be allocated, an unknown custom candidate name.
  static Result<std::unique_ptr<CommCollectiveSource>> create(comm::Communicator& comm,
                                                              uint64_t max_bytes,
                                                              SourceOptions options);

  // Collective over the communicator: every rank calls it with the same arguments. Measures
  // `algos` at `bytes` and returns identical results on every rank. A candidate whose name
  // does not parse, that is invalid here (shm across nodes, native without a transport one),
  // fails, or exceeds the trial timeout is a failed result with its reason. A comparison the
  // budget stopped is returned (Comparison::stopped) when it has kMinRoundsWhenStopped
  // rounds. Errors: bytes not a positive multiple of 4 or above max_bytes; the budget spent
  // before a usable comparison (kTimeout; budget_exhausted()); the agreement between the
  // ranks failing (kPeerFailed / kTimeout).
  Result<Comparison> measure(uint64_t bytes, const std::vector<std::string>& algos) override;

  // Collective over the communicator, like measure(): runs each of `algos` twice at `bytes`,
  // untimed and unrecorded, so that a search that follows measures the transport as a job's
  // steady state finds it (socket buffers grown, connections and segments set up by the
  // largest messages) rather than fresh. On 4 namespace nodes, without it, two exhaustive
  // searches in a row disagreed at 256 KiB by 0.72-0.87 (tree fast in the fresh first run
  // only); bench/predict/README.md. A candidate that fails here is not an error (the search
  // records its failure). Errors: as measure() (budget spent, the agreement failing).
  Status warm_up(uint64_t bytes, const std::vector<std::string>& algos);

  // Every measure() that completed, in order.
  const std::vector<SourceRecord>& records() const { return records_; }
  // Tags later records (e.g. 0 = the search, 1 = its verification).
  void set_phase(int phase) { phase_ = phase; }
  // True once the budget stopped a comparison or made measure() refuse.
  bool budget_exhausted() const override { return budget_exhausted_; }
  // Seconds since create() or reset_budget() (the slowest rank's, as of the last agreement).
  double elapsed_s() const { return agreed_elapsed_s_; }
  // Restarts the budget clock (for a second, separately budgeted search).
  void reset_budget(double budget_s);

 private:
  CommCollectiveSource(comm::Communicator& comm, comm::SharedBuffer buf, SourceOptions o);
  struct Prepared;
  Result<std::vector<Prepared>> prepare(uint64_t bytes, const std::vector<std::string>& algos);
  Result<double> run_trial(const Prepared& p, size_t count);
  Status call_once(const Prepared& p, size_t count);
  Status agree_max(std::vector<double>& values);
  // Records the agreed elapsed time; true (and budget_exhausted()) once it reaches the budget.
  bool past_budget(double agreed_elapsed_s);
  Error budget_spent() const;
  // Whether a comparison or warm-up at `bytes` may start: the size fits the buffer, no earlier
  // agreement failed, the budget is not spent.
  Status ready_for(uint64_t bytes) const;

  comm::Communicator& comm_;
  comm::SharedBuffer buf_;
  SourceOptions options_;
  std::vector<SourceRecord> records_;
  int phase_ = 0;
  bool budget_exhausted_ = false;
  std::chrono::steady_clock::time_point start_;
  double agreed_elapsed_s_ = 0;
  Status fatal_;  // set when the agreement failed: every later trial fails fast
};

}  // namespace dltune::tuner
