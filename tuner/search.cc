#include "tuner/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "common/log.h"
#include "common/strings.h"
#include "tuner/cost_model.h"

namespace dltune::tuner {
namespace {

Status check_inputs(const std::vector<std::string>& algos, const std::vector<uint64_t>& sizes) {
  if (algos.empty()) return invalid_input("no algorithms to tune");
  if (sizes.empty()) return invalid_input("no message sizes to tune");
  if (!std::is_sorted(sizes.begin(), sizes.end())) {
    return invalid_input("message sizes must be ascending");
  }
  return ok_status();
}

// Records a comparison at `bytes` into `out` and returns the winner's index (-1 if none).
int record(const Comparison& cmp, uint64_t bytes, SizeChoice& choice, SearchResult& out) {
  out.cost_s += cmp.cost_s;
  out.comparisons += 1;
  choice.bytes = bytes;
  choice.measured = true;
  choice.candidates.clear();
  for (const CandidateResult& r : cmp.results) {
    choice.candidates.push_back(r.name);
    if (r.failed)
      out.failures.push_back(r.name + " at " + std::to_string(bytes) + " B: " + r.failure);
  }
  const int b = cmp.best();
  if (b >= 0) {
    choice.algo = cmp.results[static_cast<size_t>(b)].name;
    choice.time_s = cmp.results[static_cast<size_t>(b)].summary.median;
  }
  return b;
}

// The smallest paired speedup of the winner over every other measured candidate.
double winner_margin(const Comparison& cmp, int best) {
  if (best < 0) return 0;
  const double tb = cmp.results[static_cast<size_t>(best)].summary.median;
  double m = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < cmp.results.size(); ++i) {
    if (static_cast<int>(i) == best || cmp.results[i].failed) continue;
    m = std::min(m, cmp.results[i].summary.median / tb);
  }
  return m;
}

// Sizes with no decision take the best the models predict there (marked extrapolated).
void fill_from_models(std::vector<SizeChoice>& choices,
                      const std::map<std::string, PiecewiseCost>& models) {
  if (models.empty()) return;
  for (SizeChoice& c : choices) {
    if (!c.algo.empty() || c.measured) continue;
    const double x = std::max<double>(1.0, static_cast<double>(c.bytes));
    double best = std::numeric_limits<double>::infinity();
    for (const auto& [name, m] : models) {
      if (const double t = m.predict(x); t < best) {
        best = t;
        c.algo = name;
      }
    }
    c.time_s = best;
    c.extrapolated = true;
  }
}

// Fits a model per algorithm to the points measured so far (those with two or more, never
// failed).
std::map<std::string, PiecewiseCost> fit_models(
    const std::map<std::string, std::vector<std::pair<double, double>>>& points,
    const std::set<std::string>& dead) {
  std::map<std::string, PiecewiseCost> models;
  for (const auto& [name, pts] : points) {
    if (dead.count(name)) continue;
    if (auto m = PiecewiseCost::fit(pts); m.ok()) models.emplace(name, std::move(*m));
  }
  return models;
}

// The search stopped by the budget: sizes never reached take the models' prediction where
// there are models (fitted to everything measured so far), else the nearest decided size's
// choice.
SearchResult stopped_by_budget(SearchResult out,
                               const std::map<std::string, PiecewiseCost>& models = {}) {
  out.budget_exhausted = true;
  fill_from_models(out.choices, models);
  fill_undecided(out.choices);
  DLTUNE_LOG(kInfo, "tuner") << "search stopped by the budget after " << out.comparisons
                             << " comparisons";
  return out;
}

// Algorithms that went over the trial timeout at one size are not measured at larger ones:
// their time only grows with the message. (Open MPI's own allreduce across 4 simulated nodes
// took 42 s per call at 8 KiB and, measured again, 15 s at 256 KiB: half of a 120 s budget,
// which then ended the search before the sizes where the choice mattered.)
struct TooSlow {
  std::set<std::string> names;
  std::vector<std::string> without(const std::vector<std::string>& algos) const {
    std::vector<std::string> out;
    for (const std::string& a : algos) {
      if (!names.count(a)) out.push_back(a);
    }
    return out;
  }
  void note(const Comparison& cmp) {
    for (const CandidateResult& r : cmp.results) {
      if (r.too_slow) names.insert(r.name);
    }
  }
};

double as_x(uint64_t bytes) { return std::max<double>(1.0, static_cast<double>(bytes)); }

// State of the second phase of model_based_search.
struct Tracker {
  CollectiveSource& source;
  SearchResult& out;
  std::map<std::string, std::vector<std::pair<double, double>>>& points;
  std::map<std::string, PiecewiseCost>& models;
  const ModelSearchOptions& o;
  int confirmed_run = 0;  // consecutive measured sizes won clearly by the same algorithm
  std::string confirmed_algo;
  int skipped_since_check = 0;
  bool surprised = false;  // the last measure_at's winner was o.surprise times its prediction

  // Algorithms that could be within the margin of the predicted best: those whose optimistic
  // time (PiecewiseCost::optimistic: below a cliff between two measured sizes, the cost may
  // not have jumped yet) is, and at least the `at_least` best predicted; the best predicted
  // comes first. (Without the optimistic time a cliff between two probes hid the algorithm
  // that still wins just above the lower probe: Open MPI's gather on 4 processes, where
  // basic_linear is 2.3x faster than binomial at 8 KiB and 26x slower at 16 KiB;
  // tuner/tests/search_recorded_test.cc.)
  std::vector<std::string> contenders(uint64_t bytes, bool extrapolated, size_t at_least) const {
    const double x = as_x(bytes);
    const double margin = extrapolated ? o.extrapolated_margin : o.margin;
    std::vector<std::tuple<double, double, std::string>> pred;  // predicted, optimistic, name
    for (const auto& [name, m] : models) pred.push_back({m.predict(x), m.optimistic(x), name});
    std::sort(pred.begin(), pred.end());
    const double best = std::get<0>(pred.front());
    std::vector<std::string> out_names;
    for (const auto& [t, low, name] : pred) {
      if (low <= best * (1 + margin) || out_names.size() < at_least) out_names.push_back(name);
    }
    // Above the probes every measurement is expensive (the largest sizes dominate the total
    // cost): measure only the best predicted and its closest rival there.
    if (extrapolated && out_names.size() > static_cast<size_t>(o.max_extrapolated_contenders)) {
      out_names.resize(static_cast<size_t>(o.max_extrapolated_contenders));
    }
    return out_names;
  }

  Status measure_at(size_t i, const std::vector<std::string>& algos) {
    SizeChoice& c = out.choices[i];
    std::map<std::string, double> predicted;
    for (const std::string& a : algos) {
      if (auto m = models.find(a); m != models.end())
        predicted[a] = m->second.predict(as_x(c.bytes));
    }
    auto cmp = source.measure(c.bytes, algos);
    if (!cmp) return std::move(cmp).error().wrap("measuring at " + std::to_string(c.bytes) + " B");
    const int b = record(*cmp, c.bytes, c, out);
    surprised =
        b >= 0 && predicted.count(c.algo) &&
        cmp->results[static_cast<size_t>(b)].summary.median > o.surprise * predicted.at(c.algo);
    for (const CandidateResult& r : cmp->results) {
      if (r.failed || r.samples.empty() || !models.count(r.name)) continue;
      points[r.name].push_back({as_x(c.bytes), r.summary.median});
      if (auto m = PiecewiseCost::fit(points[r.name]); m.ok()) models.at(r.name) = std::move(*m);
    }
    const bool clear = b >= 0 && winner_margin(*cmp, b) >= o.confirm_speedup;
    confirmed_run = clear ? (c.algo == confirmed_algo ? confirmed_run + 1 : 1) : 0;
    confirmed_algo = c.algo;
    return ok_status();
  }

  // Re-examines the unmeasured sizes just below i whose choice differs from i's winner.
  Status backfill(size_t i) {
    const std::string winner = out.choices[i].algo;
    for (size_t j = i; j-- > 0;) {
      SizeChoice& c = out.choices[j];
      if (c.measured || winner.empty() || c.algo == winner) break;
      const std::string previous = c.algo;
      const int saved_run = confirmed_run;
      const std::string saved_algo = confirmed_algo;
      DLTUNE_TRY(measure_at(j, {previous, winner}));
      confirmed_run = saved_run;
      confirmed_algo = saved_algo;
      if (c.algo == previous) break;  // the crossover lies between j and j + 1
    }
    return ok_status();
  }
};

// 3. Refinement. The models assume times smooth in the size, and across a network they are
// not: on 4 namespace nodes hier measured 432 us at 64 KiB, 575 at 128 KiB and 1760 at
// 256 KiB, and rd 190 us at 8 KiB, 418 at 16 KiB and 317 at 32 KiB. A dip of an algorithm the
// models pruned, or a spike of the choice at a size left unmeasured, goes unseen. So, with
// the search's cost so far as the unit, up to o.refine_fraction of it more is spent measuring,
// at each size, the algorithms not yet measured there against the current choice (a paired
// comparison, like every other). Sizes go ascending: a whole comparison costs least there,
// and that is where the models pruned most for what it saves. It stops before the comparison
// whose cost, estimated from the last one's scaled by the models' predicted round times, would
// go over; a budget that runs out ends it too, keeping every choice made. An algorithm that
// fails here is not tried at larger sizes.
Status refine(CollectiveSource& source, SearchResult& out,
              const std::map<std::string, PiecewiseCost>& models, const ModelSearchOptions& o) {
  const double allowance = o.refine_fraction * out.cost_s;
  const double start_cost = out.cost_s;
  double last_cost = 0, last_round = 0;  // of the last refinement comparison
  int refined = 0, changed = 0;
  std::set<std::string> failed;
  for (SizeChoice& c : out.choices) {
    std::vector<std::string> algos;
    if (!c.algo.empty()) algos.push_back(c.algo);
    for (const auto& [name, m] : models) {
      const bool seen =
          std::find(c.candidates.begin(), c.candidates.end(), name) != c.candidates.end();
      if (!seen && name != c.algo && !failed.count(name)) algos.push_back(name);
    }
    if (algos.size() == (c.algo.empty() ? 0u : 1u)) continue;  // nothing left out here
    double round = 0;
    for (const std::string& a : algos) {
      if (auto m = models.find(a); m != models.end()) round += m->second.predict(as_x(c.bytes));
    }
    const double estimate = last_round > 0 ? last_cost * round / last_round : 0;
    if (out.cost_s - start_cost + estimate > allowance) break;
    const SizeChoice before = c;
    auto cmp = source.measure(c.bytes, algos);
    if (!cmp && source.budget_exhausted()) {
      DLTUNE_LOG(kInfo, "tuner") << "refinement stopped by the budget at " << c.bytes << " B";
      out.budget_exhausted = true;  // every size keeps the choice it had
      break;
    }
    if (!cmp) return std::move(cmp).error().wrap("refining at " + std::to_string(c.bytes) + " B");
    const double cost_before = out.cost_s;
    if (record(*cmp, c.bytes, c, out) < 0) {  // every one failed: keep what was there
      c.algo = before.algo;
      c.time_s = before.time_s;
      c.measured = before.measured;
    } else {
      c.extrapolated = false;
    }
    for (const CandidateResult& r : cmp->results) {
      if (r.failed) failed.insert(r.name);
    }
    last_cost = out.cost_s - cost_before;
    last_round = round;
    for (const std::string& a : before.candidates) {
      if (std::find(c.candidates.begin(), c.candidates.end(), a) == c.candidates.end())
        c.candidates.push_back(a);
    }
    ++refined;
    if (c.algo != before.algo) {
      ++changed;
      DLTUNE_LOG(kInfo, "tuner") << "refinement at " << c.bytes << " B: " << c.algo << " beat "
                                 << (before.algo.empty() ? "nothing" : before.algo);
    }
  }
  DLTUNE_LOG(kInfo, "tuner") << "refinement: " << refined << " sizes measured with the "
                             << "algorithms left out, " << changed << " choices changed, "
                             << out.cost_s - start_cost << " s";
  return ok_status();
}

}  // namespace

Result<SearchResult> exhaustive_search(CollectiveSource& source,
                                       const std::vector<std::string>& algos,
                                       const std::vector<uint64_t>& sizes) {
  DLTUNE_TRY(check_inputs(algos, sizes));
  SearchResult out;
  out.choices.resize(sizes.size());
  TooSlow too_slow;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.choices[i].bytes = sizes[i];
    const std::vector<std::string> live = too_slow.without(algos);
    if (live.empty()) continue;  // every algorithm timed out below: fill_undecided() there
    auto cmp = source.measure(sizes[i], live);
    if (!cmp && source.budget_exhausted()) return stopped_by_budget(std::move(out));
    if (!cmp) return std::move(cmp).error().wrap("measuring at " + std::to_string(sizes[i]) + " B");
    record(*cmp, sizes[i], out.choices[i], out);
    too_slow.note(*cmp);
  }
  fill_undecided(out.choices);
  return out;
}

Result<SearchResult> model_based_search(CollectiveSource& source,
                                        const std::vector<std::string>& algos,
                                        const std::vector<uint64_t>& sizes,
                                        const ModelSearchOptions& o) {
  DLTUNE_TRY(check_inputs(algos, sizes));
  SearchResult out;
  out.choices.resize(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) out.choices[i].bytes = sizes[i];

  // 1. Probes: every algorithm at every probe_stride-th size up to probe_max_bytes (and always
  //    at the two smallest eligible, so that every model has two points).
  std::map<std::string, std::vector<std::pair<double, double>>> points;
  std::set<std::string> dead;  // algorithms that failed at a probe: not trusted above it
  TooSlow too_slow;            // and those that timed out are not probed above it either
  uint64_t last_probe = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const bool probe = (i % static_cast<size_t>(o.probe_stride) == 0 || i == 1) &&
                       (sizes[i] <= o.probe_max_bytes || i <= 1);
    const std::vector<std::string> live = too_slow.without(algos);
    if (!probe || live.empty()) continue;
    auto cmp = source.measure(sizes[i], live);
    if (!cmp && source.budget_exhausted())
      return stopped_by_budget(std::move(out), fit_models(points, dead));
    if (!cmp) return std::move(cmp).error().wrap("probing at " + std::to_string(sizes[i]) + " B");
    record(*cmp, sizes[i], out.choices[i], out);
    too_slow.note(*cmp);
    for (const CandidateResult& r : cmp->results) {
      if (r.failed) {
        dead.insert(r.name);
      } else {
        points[r.name].push_back({as_x(sizes[i]), r.summary.median});
      }
    }
    last_probe = sizes[i];
  }
  std::map<std::string, PiecewiseCost> models = fit_models(points, dead);
  if (models.empty()) return peer_failed("every algorithm failed while probing");

  // 2. The remaining sizes, ascending: measure the contenders the models allow, refit the
  //    models with what was measured, and, when a measured winner differs from the choice at
  //    the sizes just skipped below it, go back and measure those (the crossover lies there).
  //    The largest size is always measured, with at least the two best predicted: the models
  //    extrapolate furthest there, a cliff the smaller sizes did not show (memory paged out,
  //    a segment past its huge pages) appears first there, and the backfill then finds where
  //    it starts.
  Tracker t{source, out, points, models, o, 0, "", 0};
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (out.choices[i].measured) continue;
    const bool is_extrapolated = sizes[i] > last_probe;
    const bool largest = i + 1 == sizes.size();
    auto contenders = t.contenders(sizes[i], is_extrapolated, largest ? 2 : 1);
    const bool trusted = !largest && t.confirmed_run >= 2 &&
                         t.confirmed_algo == contenders.front() &&
                         t.skipped_since_check + 1 < o.confirm_stride;
    if ((contenders.size() == 1 && !largest) || trusted) {
      out.choices[i].algo = contenders.front();
      out.choices[i].time_s = models.at(contenders.front()).predict(as_x(sizes[i]));
      ++t.skipped_since_check;
      continue;
    }
    t.skipped_since_check = 0;
    // The winner measured at the nearest smaller size stays a contender: above the probes the
    // models keep only two, and on a noisy network a model refit with one lucky or unlucky
    // median may drop the algorithm that won just below (4 namespace nodes, 8 MiB: hier, the
    // winner at 4 MiB, was left out for two flat rings, 0.69 of it in the verifying run).
    for (size_t j = i; j-- > 0;) {
      const SizeChoice& below = out.choices[j];
      if (!below.measured || below.algo.empty()) continue;
      if (std::find(contenders.begin(), contenders.end(), below.algo) == contenders.end() &&
          models.count(below.algo))
        contenders.push_back(below.algo);
      break;
    }
    Status s = t.measure_at(i, contenders);
    if (s.ok() && t.surprised) {
      // The winner's model now includes its surprising time: ask the models again and measure
      // the winner against those they now rate best that were not measured here, once.
      std::vector<std::string> again = {out.choices[i].algo};
      for (const std::string& a : t.contenders(sizes[i], is_extrapolated, 2)) {
        if (std::find(contenders.begin(), contenders.end(), a) == contenders.end())
          again.push_back(a);
      }
      if (again.size() > 1) {
        DLTUNE_LOG(kInfo, "tuner")
            << "at " << sizes[i] << " B " << out.choices[i].algo << " was over " << o.surprise
            << "x its predicted time: measuring it again with " << strings::join(again, ", ");
        s = t.measure_at(i, again);
      }
    }
    if (s.ok()) s = t.backfill(i);
    if (!s.ok() && source.budget_exhausted()) return stopped_by_budget(std::move(out), models);
    DLTUNE_TRY(s);
  }
  if (o.refine_fraction > 0) DLTUNE_TRY(refine(source, out, models, o));
  DLTUNE_LOG(kInfo, "tuner") << "model-based search: " << out.comparisons << " comparisons, "
                             << out.cost_s << " s of trials";
  return out;
}

void fill_undecided(std::vector<SizeChoice>& choices) {
  const auto undecided = [](const SizeChoice& c) { return c.algo.empty() && !c.measured; };
  std::vector<size_t> decided;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (!choices[i].algo.empty()) decided.push_back(i);
  }
  if (decided.empty()) return;
  size_t next = 0;  // the first decided index at or above i
  for (size_t i = 0; i < choices.size(); ++i) {
    while (next < decided.size() && decided[next] < i) ++next;
    if (!undecided(choices[i])) continue;
    size_t from = next < decided.size() ? decided[next] : decided.back();
    if (next > 0 && (next == decided.size() || i - decided[next - 1] <= decided[next] - i)) {
      from = decided[next - 1];
    }
    choices[i].algo = choices[from].algo;
    choices[i].time_s = 0;
    choices[i].extrapolated = true;
  }
}

std::vector<SizeRange> to_ranges(const std::vector<SizeChoice>& choices) {
  std::vector<SizeRange> out;
  std::string carry;  // the last non-empty choice, for sizes where everything failed
  for (const SizeChoice& c : choices) {
    if (!c.algo.empty()) {
      carry = c.algo;
      break;
    }
  }
  for (size_t i = 0; i < choices.size(); ++i) {
    const std::string algo = choices[i].algo.empty() ? carry : choices[i].algo;
    carry = algo;
    const uint64_t lo = i == 0 ? 0 : choices[i].bytes;
    const uint64_t hi =
        i + 1 < choices.size() ? choices[i + 1].bytes : std::numeric_limits<uint64_t>::max();
    if (!out.empty() && out.back().algo == algo) {
      out.back().max_bytes = hi;
    } else {
      out.push_back({lo, hi, algo});
    }
  }
  return out;
}

}  // namespace dltune::tuner
