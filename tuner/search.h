// Search strategies for collective tuning: which algorithm at which message size.
//
// exhaustive_search() measures every algorithm at every size (the reference, the "oracle").
// model_based_search() measures every algorithm at a few probe sizes only, fits a cost model
// per algorithm (tuner/cost_model.h), and then measures, at the remaining sizes, only the
// algorithms the models say could win there, so most of the cost of the large sizes (which
// dominate the total) is never spent on algorithms that have no chance. The models can be wrong
// where the probes could not see (a cliff above them: memory paged out between calls, a
// segment past its huge pages), so: the largest size, where they extrapolate furthest, is
// always measured, with at least its two best predicted algorithms; at every size measured,
// the winner measured at the nearest smaller size is measured too; and wherever a measured
// winner turns out much slower than its model predicted (ModelSearchOptions::surprise), the
// size is measured again with the algorithms the models, refit with that time, now rate best.
// Last, because times across a network are not smooth in the size (a protocol switch, a TCP
// window) and no model fitted between probes sees a dip or a spike there, the search spends a
// bounded fraction more (ModelSearchOptions::refine_fraction) measuring, at each size, the
// algorithms it left out against its choice, smallest (cheapest) sizes first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "tuner/measure.h"

namespace dltune::tuner {

// Measures a set of algorithms at one message size, interleaved. The real source runs
// collectives through comm/; tests use synthetic ones.
//
// A source with a budget checks it after every trial (MeasureOptions::stop): a comparison
// stopped by it is returned when it has kMinRoundsWhenStopped measured rounds (it still
// decides its size), else measure() fails; either way budget_exhausted() turns true and every
// later measure() fails. The searches then end gracefully with what they have.
class CollectiveSource {
 public:
  virtual ~CollectiveSource() = default;
  // Errors end the search (e.g. the ranks died, or the budget is spent); a failing algorithm
  // is not an error but a failed CandidateResult.
  virtual Result<Comparison> measure(uint64_t bytes, const std::vector<std::string>& algos) = 0;
  // True once the budget stopped a comparison or made measure() refuse.
  virtual bool budget_exhausted() const { return false; }
};

inline constexpr int kMinRoundsWhenStopped = 3;

struct SizeChoice {
  uint64_t bytes = 0;
  std::string algo;           // the chosen algorithm ("" when every candidate failed)
  double time_s = 0;          // measured median, or predicted when not measured
  bool measured = false;      // whether the choice at this size rests on a measurement
  bool extrapolated = false;  // not reached before the budget ran out: the cost models' best
                              // (time_s their prediction) where the search had fitted models,
                              // else the nearest decided size's choice (fill_undecided, time 0)
  std::vector<std::string> candidates;  // what was measured at this size (empty: none)
};

struct SearchResult {
  std::vector<SizeChoice> choices;    // one per size, ascending
  bool budget_exhausted = false;      // stopped by the source's budget; see fill_undecided
  double cost_s = 0;                  // total time of every trial run
  int comparisons = 0;                // calls to CollectiveSource::measure
  std::vector<std::string> failures;  // "algo at N bytes: reason", for the report
};

// Sizes with no decision (never measured nor predicted; not sizes where every candidate
// failed) take the choice of the nearest size that has one (the smaller on a tie) and are
// marked extrapolated. Nothing changes when no size has a decision.
void fill_undecided(std::vector<SizeChoice>& choices);

// An algorithm that goes over the trial timeout (CandidateResult::too_slow) at one size is not
// measured at larger sizes by either search: its time only grows with the message.

// Measures every algorithm at every size. Errors: no algorithms or sizes, or a source error
// other than the budget (which ends the search with what it has, the rest fill_undecided()).
Result<SearchResult> exhaustive_search(CollectiveSource& source,
                                       const std::vector<std::string>& algos,
                                       const std::vector<uint64_t>& sizes);

struct ModelSearchOptions {
  int probe_stride = 3;                 // probe every 3rd size (4 B, 32 B, 256 B, ...)
  uint64_t probe_max_bytes = 8u << 20;  // no all-algorithm probes above this size
  double margin = 0.30;                 // "could win": predicted within 30 % of the predicted best
  double extrapolated_margin = 0.6;     // wider above the last probe, where models extrapolate
  int max_extrapolated_contenders = 2;  // but at most this many are measured there
  double confirm_speedup = 1.15;        // a winner this much faster twice in a row is trusted ...
  int confirm_stride = 2;               // ... and then only every 2nd larger size is measured
  double surprise = 1.5;  // a measured winner this much slower than predicted: ask again
  // Then up to this fraction of the search's cost more is spent on the algorithms it did not
  // measure, the smallest sizes first (see model_based_search). 0 turns this off.
  double refine_fraction = 0.5;
};

// The model-based strategy described above. Errors and the budget as for exhaustive_search.
Result<SearchResult> model_based_search(CollectiveSource& source,
                                        const std::vector<std::string>& algos,
                                        const std::vector<uint64_t>& sizes,
                                        const ModelSearchOptions& options = {});

// A half-open size range [min_bytes, max_bytes) and its algorithm, as the Plan stores them.
struct SizeRange {
  uint64_t min_bytes = 0;
  uint64_t max_bytes = 0;
  std::string algo;
};
// Turns per-size choices into contiguous ranges: the choice at size s covers [s, next size),
// the first range starts at 0 and the last ends at UINT64_MAX; neighbours with the same
// algorithm merge. Sizes whose every candidate failed take their neighbour's choice.
std::vector<SizeRange> to_ranges(const std::vector<SizeChoice>& choices);

}  // namespace dltune::tuner
