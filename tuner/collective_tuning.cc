#include "tuner/collective_tuning.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

#include "common/log.h"
#include "common/stats.h"
#include "common/strings.h"

namespace dltune::tuner {
namespace {

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// The latest record of `phase` at `bytes`, or null.
const SourceRecord* latest(const std::vector<SourceRecord>& recs, uint64_t bytes, int phase) {
  for (auto it = recs.rbegin(); it != recs.rend(); ++it) {
    if (it->bytes == bytes && it->phase == phase) return &*it;
  }
  return nullptr;
}

// Median over the rounds both took part in of num[r] / den[r] (samples are in round order and
// a candidate that failed keeps a prefix, so index r is the same round for both).
double paired(const CandidateResult& num, const CandidateResult& den) {
  std::vector<double> r;
  for (size_t i = 0; i < std::min(num.samples.size(), den.samples.size()); ++i) {
    if (den.samples[i] > 0) r.push_back(num.samples[i] / den.samples[i]);
  }
  return r.empty() ? 0 : stats::median(r);
}

// The size's decision, with its runner-up from the comparison that decided it.
SizeOutcome size_outcome(const SizeChoice& c, const SourceRecord* rec) {
  SizeOutcome s;
  s.bytes = c.bytes;
  s.chosen = c.algo;
  s.time_us = c.time_s * 1e6;
  s.measured = c.measured;
  s.extrapolated = c.extrapolated;
  s.measured_candidates = c.candidates;
  if (rec == nullptr || c.algo.empty() || !c.measured) return s;
  const CandidateResult* chosen = rec->comparison.find(c.algo);
  if (chosen == nullptr) return s;
  const CandidateResult* runner = nullptr;
  for (const CandidateResult& r : rec->comparison.results) {
    if (&r == chosen || r.failed || r.samples.empty()) continue;
    if (runner == nullptr || r.summary.median < runner->summary.median) runner = &r;
  }
  if (runner == nullptr) return s;
  s.runner_up = runner->name;
  s.runner_up_us = runner->summary.median * 1e6;
  s.paired_ratio = paired(*runner, *chosen);
  return s;
}

// Sizes where every candidate failed take the choice below (above, before the first), as
// to_ranges() does.
void fill_failed(std::vector<SizeOutcome>& sizes) {
  std::string carry;
  for (const auto& s : sizes) {
    if (!s.chosen.empty()) {
      carry = s.chosen;
      break;
    }
  }
  for (auto& s : sizes) {
    if (s.chosen.empty()) s.chosen = carry;
    carry = s.chosen;
  }
}

std::vector<MeasuredPoint> measured_points(const std::vector<SourceRecord>& recs) {
  std::map<std::pair<uint64_t, std::string>, MeasuredPoint> latest_point;
  for (const SourceRecord& rec : recs) {
    for (const CandidateResult& r : rec.comparison.results) {
      MeasuredPoint p;
      p.bytes = rec.bytes;
      p.candidate = r.name;
      p.median_us = r.summary.median * 1e6;
      p.p10_us = r.summary.p10 * 1e6;
      p.p90_us = r.summary.p90 * 1e6;
      p.iqr_us = r.summary.iqr * 1e6;
      p.samples = static_cast<int64_t>(r.samples.size());
      p.failed = r.failed;
      p.reason = r.failure;
      latest_point[{rec.bytes, r.name}] = std::move(p);
    }
  }
  std::vector<MeasuredPoint> out;
  for (auto& [k, p] : latest_point) out.push_back(std::move(p));
  return out;
}

VerifyReport verify_report(const TuningOutcome& o, const SearchResult& ex,
                           const std::vector<SourceRecord>& recs) {
  VerifyReport v;
  v.exhaustive_s = ex.cost_s;
  v.cost_fraction = ex.cost_s > 0 ? o.tuning_s / ex.cost_s : 0;
  v.worst_vs_oracle = 1.0;
  for (size_t i = 0; i < o.sizes.size() && i < ex.choices.size(); ++i) {
    VerifyRow row;
    row.bytes = o.sizes[i].bytes;
    row.chosen = o.sizes[i].chosen;
    row.oracle = ex.choices[i].algo;
    const SourceRecord* rec = latest(recs, row.bytes, 1);
    const CandidateResult* c = rec ? rec->comparison.find(row.chosen) : nullptr;
    const CandidateResult* b = rec ? rec->comparison.find(row.oracle) : nullptr;
    if (c != nullptr && b != nullptr && !c->failed && !b->failed) {
      row.chosen_us = c->summary.median * 1e6;
      row.oracle_us = b->summary.median * 1e6;
      // From the two medians printed beside it, so that the row reads consistently (the
      // median of per-round ratios can disagree with the ratio of medians on a noisy machine:
      // "vs_oracle 1.998" beside a chosen time 4x the oracle's).
      row.vs_oracle = c == b || row.chosen_us <= 0 ? 1.0 : row.oracle_us / row.chosen_us;
    }
    const std::vector<std::string>& searched = o.sizes[i].measured_candidates;
    row.searched_all = !ex.choices[i].candidates.empty();
    for (const std::string& name : ex.choices[i].candidates) {
      const CandidateResult* r = rec ? rec->comparison.find(name) : nullptr;
      if (r != nullptr && r->failed) continue;  // nothing to compare against
      if (std::find(searched.begin(), searched.end(), name) == searched.end())
        row.searched_all = false;
    }
    v.worst_vs_oracle = std::min(v.worst_vs_oracle, row.vs_oracle);
    if (row.searched_all)
      v.worst_where_searched_all = std::min(v.worst_where_searched_all, row.vs_oracle);
    v.rows.push_back(std::move(row));
  }
  return v;
}

// Tells an observer about every comparison before the source measures it.
class ObservedSource : public CollectiveSource {
 public:
  ObservedSource(CollectiveSource& inner, const MeasureObserver& observer,
                 const std::vector<uint64_t>& sizes)
      : inner_(inner), observer_(observer), sizes_(sizes) {}
  Result<Comparison> measure(uint64_t bytes, const std::vector<std::string>& algos) override {
    if (observer_) {
      const auto it = std::find(sizes_.begin(), sizes_.end(), bytes);
      observer_(bytes, static_cast<size_t>(it - sizes_.begin()), sizes_.size(), algos);
    }
    return inner_.measure(bytes, algos);
  }
  bool budget_exhausted() const override { return inner_.budget_exhausted(); }

 private:
  CollectiveSource& inner_;
  const MeasureObserver& observer_;
  const std::vector<uint64_t>& sizes_;
};

}  // namespace

Result<std::vector<uint64_t>> tuning_sizes(uint64_t min_bytes, uint64_t max_bytes) {
  if (min_bytes < 4 || !is_pow2(min_bytes)) {
    return invalid_input("--min-bytes must be a power of two of at least 4 B, got " +
                         std::to_string(min_bytes));
  }
  if (max_bytes < min_bytes || max_bytes > kTuneMaxBytesLimit) {
    return invalid_input("--max-bytes must lie between --min-bytes (" +
                         strings::format_bytes(min_bytes) + ") and 1 GiB, got " +
                         strings::format_bytes(max_bytes));
  }
  std::vector<uint64_t> sizes;
  for (uint64_t b = min_bytes; b <= max_bytes; b *= 2) sizes.push_back(b);
  return sizes;
}

Status check_strategy(const std::string& s) {
  if (s == "model" || s == "exhaustive") return ok_status();
  return invalid_input("--strategy must be 'model' or 'exhaustive', got '" + s + "'");
}

Result<TuningOutcome> tune_collectives(comm::Communicator& comm, const TuneOptions& options) {
  auto sizes = tuning_sizes(options.min_bytes, options.max_bytes);
  if (!sizes) return sizes.error();
  DLTUNE_TRY(check_strategy(options.strategy));
  TuningOutcome out;
  out.ranks = comm.size();
  out.nodes = comm.node_count();
  out.strategy = options.strategy;
  out.candidates = options.candidates;
  if (out.candidates.empty()) {
    float x = 0;  // collective probe: does the transport have its own allreduce?
    const bool native =
        comm.native_allreduce(&x, &x, 1, comm::DataType::kF32, comm::ReduceOp::kSum).ok();
    out.candidates = default_candidates(out.nodes, native);
  }
  SourceOptions source_options = options.source;
  if (source_options.budget_share <= 0)
    source_options.budget_share = 1.0 / static_cast<double>(sizes->size());
  auto src = CommCollectiveSource::create(comm, sizes->back(), source_options);
  if (!src) return src.error();
  CommCollectiveSource& source = **src;
  ObservedSource observed(source, options.on_measure, *sizes);
  // Across nodes, the network as a job's steady state finds it: every candidate at the largest
  // size first (Open MPI's own allreduce left out: it shares the connections the others warm,
  // and where it spins on shared cores one call can take seconds; collective_source.h). On one
  // node shared memory has no such state, and two exhaustive runs agree without it.
  std::vector<std::string> warm;
  if (out.nodes > 1)
    std::copy_if(out.candidates.begin(), out.candidates.end(), std::back_inserter(warm),
                 [](const std::string& c) { return c != "native"; });
  if (Status w = warm.empty() ? ok_status() : source.warm_up(sizes->back(), warm);
      !w.ok() && !source.budget_exhausted())
    return std::move(w).error().wrap("warming up the network");

  auto search = options.strategy == "exhaustive"
                    ? exhaustive_search(observed, out.candidates, *sizes)
                    : model_based_search(observed, out.candidates, *sizes);
  if (!search) return std::move(search).error();
  out.failures = search->failures;
  out.comparisons = search->comparisons;
  out.budget_exhausted = search->budget_exhausted;
  out.tuning_s = source.elapsed_s();  // agreed: the same on every rank
  for (const SizeChoice& c : search->choices) {
    out.sizes.push_back(size_outcome(c, latest(source.records(), c.bytes, 0)));
  }
  fill_failed(out.sizes);
  if (out.sizes.empty() || out.sizes.front().chosen.empty()) {
    return timeout_error("the budget of " + std::to_string(options.source.budget_s) +
                         " s ran out before any size was measured; give a larger --budget");
  }

  if (options.verify) {
    source.set_phase(1);
    source.reset_budget(0);
    auto ex = exhaustive_search(observed, out.candidates, *sizes);
    if (!ex) return std::move(ex).error().wrap("verifying against exhaustive search");
    out.verify = verify_report(out, *ex, source.records());
  }
  out.measurements = measured_points(source.records());
  DLTUNE_LOG(kInfo, "tuner") << "collective tuning: " << out.comparisons << " comparisons in "
                             << out.tuning_s << " s";
  return out;
}

}  // namespace dltune::tuner
