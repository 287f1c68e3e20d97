#include "tuner/collective_plan.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "common/strings.h"
#include "tuner/collective_source.h"
#include "tuner/plan_confidence.h"
#include "tuner/search.h"

namespace dltune::tuner {
namespace {

std::string range_text(uint64_t lo, uint64_t hi) {
  return "[" + strings::format_bytes(lo) + ", " +
         (hi == recipes::kPlanMaxBytes ? std::string("max") : strings::format_bytes(hi)) + ")";
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

Result<recipes::Plan> plan_from_outcome(const TuningOutcome& o) {
  if (o.sizes.empty()) return invalid_input("the tuning outcome has no message sizes");
  if (o.ranks < 1 || o.nodes < 1 || o.ranks % o.nodes != 0) {
    return invalid_input("the tuning outcome has an impossible job shape (" +
                         std::to_string(o.ranks) + " ranks on " + std::to_string(o.nodes) +
                         " nodes)");
  }
  std::vector<SizeChoice> choices;
  for (const SizeOutcome& s : o.sizes) {
    SizeChoice c;
    c.bytes = s.bytes;
    c.algo = s.chosen;
    choices.push_back(std::move(c));
  }
  std::vector<recipes::SizeRange> ranges;
  std::string why;
  size_t extrapolated = 0;
  for (const SizeOutcome& s : o.sizes) extrapolated += s.extrapolated ? 1 : 0;
  for (const SizeRange& r : to_ranges(choices)) {
    auto cand = parse_candidate(r.algo);
    if (!cand) return std::move(cand).error().wrap("the tuning outcome");
    auto algo = recipes::parse_algorithm(comm::algorithm_name(cand->algo));
    if (!algo) return invalid_input("the plan cannot express algorithm '" + r.algo + "'");
    ranges.push_back({r.min_bytes, r.max_bytes, *algo, cand->segment_bytes});
    why += (why.empty() ? "" : ", ") + r.algo + " " + range_text(r.min_bytes, r.max_bytes);
  }
  recipes::Plan plan = recipes::default_plan(o.nodes, o.ranks / o.nodes, 1, ranges[0].algo);
  plan.collectives[recipes::Collective::kAllreduce] = std::move(ranges);
  plan.provenance.source = recipes::PlanSource::kTuned;
  plan.provenance.reason = (o.strategy == "exhaustive" ? "exhaustive" : "model-based") +
                           std::string(" search over ") + std::to_string(o.candidates.size()) +
                           " candidates at " + std::to_string(o.sizes.size()) + " sizes (" +
                           fmt("%.1f", o.tuning_s) + " s" +
                           (o.budget_exhausted ? ", stopped by the budget" : "") +
                           (extrapolated > 0 ? ", " + std::to_string(extrapolated) +
                                                   " sizes not reached take the cost models' "
                                                   "best or the nearest decided size's choice"
                                             : "") +
                           "): " + why;
  // What an exhaustive search could still gain at the tuned sizes, each weighted alike, from
  // cost models through the measurements (plan_confidence.h).
  std::vector<CollectivePoint> points;
  for (const MeasuredPoint& m : o.measurements) {
    if (!m.failed) points.push_back({m.bytes, m.candidate, m.median_us});
  }
  std::vector<std::pair<uint64_t, double>> sizes;
  std::map<uint64_t, std::string> chosen;
  for (const SizeOutcome& s : o.sizes) {
    sizes.emplace_back(s.bytes, 1.0);
    chosen[s.bytes] = s.chosen;
  }
  plan.provenance.collective_regret = collective_regret(
      points, [&](uint64_t b) { return chosen[b]; }, sizes);
  DLTUNE_TRY(recipes::validate_plan(plan));
  return plan;
}

std::vector<db::Measurement> measurement_rows(const TuningOutcome& o, const db::Key& key,
                                              const db::Provenance& provenance) {
  std::vector<db::Measurement> rows;
  for (const MeasuredPoint& p : o.measurements) {
    db::Measurement m;
    m.key = key;
    m.collective = "allreduce";
    auto cand = parse_candidate(p.candidate);
    m.algorithm =
        cand ? std::string(comm::algorithm_name(cand->algo)) : db::clean_text(p.candidate);
    m.segment_bytes = cand ? cand->segment_bytes : 0;
    m.bytes = p.bytes;
    m.median_us = p.median_us;
    m.p10_us = p.p10_us;
    m.p90_us = p.p90_us;
    m.iqr_us = p.iqr_us;
    m.samples = p.samples;
    m.failed = p.failed;
    m.reason = db::clean_text(p.reason);
    m.provenance = provenance;
    rows.push_back(std::move(m));
  }
  return rows;
}

std::string format_outcome(const TuningOutcome& o) {
  std::ostringstream os;
  os << "allreduce f32 sum, " << o.ranks << " ranks on " << o.nodes << " node(s); "
     << (o.strategy == "exhaustive" ? "exhaustive" : "model-based") << " search over "
     << strings::join(o.candidates, ", ") << "\n"
     << "measured " << o.comparisons << " comparisons in " << fmt("%.2f", o.tuning_s) << " s"
     << (o.budget_exhausted
             ? " (stopped by the budget; sizes not reached take the cost models' best, or the "
               "nearest decided size's choice)"
             : "")
     << "\n\n";
  os << "      size  chosen          median_us  runner-up       runner_us  paired\n";
  for (const SizeOutcome& s : o.sizes) {
    char line[200];
    std::snprintf(line, sizeof line, "%10s  %-14s %10.2f%s %-14s %10s  %s\n",
                  strings::format_bytes(s.bytes).c_str(), s.chosen.c_str(), s.time_us,
                  s.measured ? " " : (s.extrapolated ? "^" : "*"),
                  s.runner_up.empty() ? "-" : s.runner_up.c_str(),
                  s.runner_up.empty() ? "-" : fmt("%.2f", s.runner_up_us).c_str(),
                  s.runner_up.empty() ? "-" : fmt("%.3fx", s.paired_ratio).c_str());
    os << line;
  }
  os << "(* predicted by the cost model, not measured at this size; ^ not reached before the "
        "budget ran out: the cost models' best or the nearest decided size's choice; paired = "
        "median over rounds of "
        "runner-up time / chosen time)\n";
  for (const std::string& f : o.failures) os << "failed: " << f << "\n";
  if (o.verify) {
    const VerifyReport& v = *o.verify;
    os << "\nverify (exhaustive search in the same run):\n"
       << "      size  chosen          chosen_us  oracle          oracle_us  vs_oracle\n";
    bool any_all = false;
    for (const VerifyRow& r : v.rows) {
      char line[200];
      std::snprintf(line, sizeof line, "%10s  %-14s %10.2f  %-14s %10.2f  %.3f%s\n",
                    strings::format_bytes(r.bytes).c_str(), r.chosen.c_str(), r.chosen_us,
                    r.oracle.c_str(), r.oracle_us, r.vs_oracle, r.searched_all ? " =" : "");
      os << line;
      any_all = any_all || r.searched_all;
    }
    os << "worst vs oracle " << fmt("%.3f", v.worst_vs_oracle) << " (1.0 = as fast); tuning "
       << fmt("%.2f", o.tuning_s) << " s vs exhaustive " << fmt("%.2f", v.exhaustive_s)
       << " s = " << fmt("%.3f", v.cost_fraction) << " of its cost\n";
    if (any_all)
      os << "(= the search measured every candidate there too: its choice was exhaustive "
            "search's one run earlier, so a gap there is this machine's run-to-run spread; "
            "worst there "
         << fmt("%.3f", v.worst_where_searched_all) << ")\n";
  }
  return os.str();
}

std::string format_plan_ranges(const recipes::Plan& plan) {
  std::ostringstream os;
  auto it = plan.collectives.find(recipes::Collective::kAllreduce);
  if (it == plan.collectives.end()) return "  (no allreduce rules)\n";
  for (const recipes::SizeRange& r : it->second) {
    os << "  " << range_text(r.min_bytes, r.max_bytes) << "  " << recipes::algorithm_name(r.algo);
    if (r.segment_bytes > 0)
      os << " (segments of " << strings::format_bytes(r.segment_bytes) << ")";
    os << "\n";
  }
  return os.str();
}

}  // namespace dltune::tuner
