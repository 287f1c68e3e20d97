// Interleaved measurement of competing candidates.
//
// This machine's cores switch for seconds at a time into phases where cross-core traffic is
// 2-5x slower (performance-facts.md). Measuring candidate A for a while and then B mistakes
// those phases for differences between A and B. So candidates are measured round-robin: each
// round runs every live candidate once, starting with a different one each round, and A is
// compared with B by the median of the per-round ratios t_A / t_B (a paired comparison: both
// samples of a round saw the same machine phase).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/stats.h"

namespace dltune::tuner {

struct MeasureOptions {
  int warmup_rounds = 2;        // rounds run first and discarded
  int min_rounds = 7;           // measured rounds before the stopping rule is consulted
  int max_rounds = 200;         // cap on measured rounds
  double target_rel_ci = 0.03;  // stop when every live candidate's median CI is within +-3 %
  double max_cost_s = 30.0;     // stop when the trials' total time exceeds this
  double trial_timeout_s = 60;  // a trial reporting more than this is recorded as failed
  // Consulted after every trial (optional): true ends the comparison at once, dropping the
  // unfinished round (Comparison::stopped). Where ranks measure together the answer must be
  // agreed between them (collective_source.h), so that all stop after the same trial.
  std::function<bool()> stop;
};

// One trial of a candidate: runs it once and returns the seconds it took (the trial times
// itself so that it can leave out set-up), or an error that marks the candidate failed.
using Trial = std::function<Result<double>()>;

struct Candidate {
  std::string name;
  Trial trial;
};

struct CandidateResult {
  std::string name;
  stats::Summary summary;       // of the measured (post-warm-up) samples, in seconds
  std::vector<double> samples;  // in round order
  bool failed = false;
  std::string failure;    // why, when failed: the trial's error or the timeout
  bool too_slow = false;  // failed by MeasureOptions::trial_timeout_s (a larger message, only
                          // slower, is not worth trying)
  // Median over rounds of (reference time / this candidate's time): > 1 means faster than the
  // reference candidate. 1.0 for the reference itself; 0 when failed.
  double paired_speedup = 0;
};

struct Comparison {
  std::vector<CandidateResult> results;  // in the order the candidates were given
  int rounds = 0;                        // measured rounds
  double cost_s = 0;                     // total seconds of every trial, warm-up included
  bool stopped = false;                  // ended by MeasureOptions::stop
  // Index of the fastest candidate by median time among those not failed; -1 if all failed.
  int best() const;
  const CandidateResult* find(const std::string& name) const;
};

// Measures `candidates` interleaved as described above. A failing candidate is recorded with
// its reason and dropped from later rounds; the others go on. Paired speedups are relative to
// candidates[reference] (or to the best when the reference failed). Never fails as a whole:
// when every candidate fails, every result says why.
Comparison measure_interleaved(const std::vector<Candidate>& candidates,
                               const MeasureOptions& options, size_t reference = 0);

}  // namespace dltune::tuner
