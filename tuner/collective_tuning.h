// Collective tuning: which allreduce algorithm (and ring segment size) at which message size,
// for the job these ranks form. The rank-side half of `dltune tune --collectives`.
//
// Every rank calls tune_collectives(); all of them measure together through a
// CommCollectiveSource and take identical decisions (collective_source.h), so every rank
// returns the same TuningOutcome. The outcome is plain data with a JSON form: rank 0 hands it
// to the `dltune` process, which stores it (collective_plan.h) and prints it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "comm/communicator.h"
#include "common/result.h"
#include "tuner/collective_source.h"

namespace dltune::tuner {

inline constexpr uint64_t kTuneMaxBytesLimit = uint64_t{1} << 30;

// Told before each comparison: the size, its index among the sizes (0-based) and their count,
// and the candidates measured there (every rank calls it; rank 0 reports progress).
using MeasureObserver = std::function<void(uint64_t bytes, size_t index, size_t count,
                                           const std::vector<std::string>& algos)>;

struct TuneOptions {
  MeasureObserver on_measure;  // optional
  uint64_t min_bytes = 4;
  uint64_t max_bytes = uint64_t{256} << 20;
  std::string strategy = "model";       // "model" or "exhaustive"
  bool verify = false;                  // also run exhaustive search and compare
  std::vector<std::string> candidates;  // empty: default_candidates()
  SourceOptions source;                 // budget_s is the search's budget (not verify's)
};

// The message sizes: powers of two from min_bytes to max_bytes. Errors (invalid_input, one
// sentence naming the flag): min_bytes not a power of two of at least 4, max_bytes below
// min_bytes or above 1 GiB.
Result<std::vector<uint64_t>> tuning_sizes(uint64_t min_bytes, uint64_t max_bytes);
// Errors (invalid_input) unless `s` is "model" or "exhaustive".
Status check_strategy(const std::string& s);

// The decision at one size.
struct SizeOutcome {
  uint64_t bytes = 0;
  std::string chosen;  // candidate name
  double time_us = 0;  // measured median, or the model's prediction when !measured
  bool measured = false;
  std::string runner_up;    // "" when nothing else was measured here
  double runner_up_us = 0;  // its median
  double paired_ratio =
      0;  // median over rounds of runner-up time / chosen time (> 1: chosen faster)
  bool extrapolated = false;  // not reached before the budget ran out: the cost models' best
                              // (time_us predicted), or the nearest decided size's choice where
                              // no models were fitted (time_us 0); search.h
  std::vector<std::string> measured_candidates{};  // what the search measured here, in order
};

// One candidate's measurement summary at one size (the latest one taken).
struct MeasuredPoint {
  uint64_t bytes = 0;
  std::string candidate;
  double median_us = 0, p10_us = 0, p90_us = 0, iqr_us = 0;
  int64_t samples = 0;
  bool failed = false;
  std::string reason;
};

// --verify: the chosen candidate against the oracle (exhaustive search's winner), both taken
// from the exhaustive comparison at that size (same rounds).
struct VerifyRow {
  uint64_t bytes = 0;
  std::string chosen, oracle;
  double chosen_us = 0, oracle_us = 0;
  double vs_oracle = 0;  // oracle_us / chosen_us, the two medians above (1.0 = as good)
  // The search, too, measured every candidate that exhaustive search measured here, so its
  // choice was exhaustive search's choice one run earlier: where vs_oracle < 1 at such a size,
  // two exhaustive runs disagree, and the gap is the machine's run-to-run spread, not pruning.
  bool searched_all = false;
};
struct VerifyReport {
  double exhaustive_s = 0;     // exhaustive search's measurement time
  double cost_fraction = 0;    // the search's time / exhaustive_s
  double worst_vs_oracle = 0;  // the smallest vs_oracle over sizes
  // The smallest vs_oracle over the rows with searched_all (1.0 when there are none): how far
  // apart two exhaustive runs' choices fall here, the floor under worst_vs_oracle.
  double worst_where_searched_all = 1.0;
  std::vector<VerifyRow> rows;
};

struct TuningOutcome {
  int ranks = 0;
  int nodes = 0;
  std::string strategy;
  std::vector<std::string> candidates;
  double tuning_s = 0;  // the search's wall time, slowest rank (verification not included)
  int comparisons = 0;
  bool budget_exhausted = false;   // stopped early: undecided sizes are `extrapolated`
  std::vector<SizeOutcome> sizes;  // ascending
  std::vector<MeasuredPoint> measurements;
  std::vector<std::string> failures;  // "CANDIDATE at N B: reason"
  std::optional<VerifyReport> verify;
};

// Collective over `comm` (every rank, same options): runs the search and, when asked, its
// verification. Errors: bad options (invalid_input), shared memory, a dead or mismatched peer,
// or a budget so small that nothing was measured (kTimeout).
Result<TuningOutcome> tune_collectives(comm::Communicator& comm, const TuneOptions& options);

nlohmann::json outcome_to_json(const TuningOutcome& outcome);
// Errors (invalid_input) on a missing or mistyped field.
Result<TuningOutcome> outcome_from_json(const nlohmann::json& j);

}  // namespace dltune::tuner
