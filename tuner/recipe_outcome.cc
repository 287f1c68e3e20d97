// Reading the trials file of a recipe tuning into its outcome: the winner, every rival
// against it, the tuned plan and its reason, confidence and regret (recipe_tuning.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "common/stats.h"
#include "common/strings.h"
#include "tuner/plan_confidence.h"
#include "tuner/recipe_tuning.h"

namespace dltune::tuner {
namespace {

using json = nlohmann::json;

// "1234.5": a throughput in the reasons (as recipe_tuning.cc prints it).
std::string fmt_sps(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// "1.12x": a ratio in the reasons.
std::string fmt_ratio(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2fx", v);
  return b;
}

// The closest three rivals that were measured, each as its comparison allows
// (plan_confidence.h's describe_ratio() for the interval):
//   significant:  "; it beat X by 1.12x (95 % interval 1.05-1.19, 12 rounds)"
//   within noise: "; it was not significantly faster than Y (1.04x, 95 % interval 0.99-1.10,
//                 15 rounds)"
//   no interval:  "; it was ahead of Z by 1.06x (2 rounds: too few for an interval)"
//   ratio < 1:    "; W measured 1.04x faster where both ran (...), but ranked lower over all
//                 rounds" (the winner was chosen over all its trials, or on another round).
// A winner is never said to beat a rival that measured faster, nor to beat one it only
// matched.
std::string closest_text(const std::vector<RecipeAlternative>& alts) {
  std::vector<RecipeAlternative> sorted;
  for (const RecipeAlternative& a : alts) {
    if (!a.failed && !a.skipped && a.ratio > 0) sorted.push_back(a);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.ratio < b.ratio; });
  std::vector<std::string> beat, level, ahead, faster;
  size_t n = 0;
  for (const RecipeAlternative& a : sorted) {
    if (n++ >= 3) break;
    stats::RatioInterval r{a.ratio, a.lo, a.hi > 0 ? a.hi : INFINITY, a.rounds};
    const bool interval = a.rounds >= stats::kMinPairedRounds && std::isfinite(r.hi);
    if (a.ratio < 1) {  // the rival's view: it over the winner
      stats::RatioInterval inv{1 / r.ratio, std::isfinite(r.hi) ? 1 / r.hi : 0,
                               r.lo > 0 ? 1 / r.lo : INFINITY, r.rounds};
      faster.push_back(a.label + " measured " +
                       (a.rounds == 0 ? fmt_ratio(inv.ratio) + " (one trial each, no interval)"
                                      : describe_ratio(inv)) +
                       " faster where both ran, but ranked lower over all rounds");
    } else if (a.rounds == 0) {
      ahead.push_back(a.label + " by " + fmt_ratio(a.ratio) + " (one trial each, no interval)");
    } else if (!interval) {
      ahead.push_back(a.label + " by " + describe_ratio(r));
    } else if (r.significant()) {
      beat.push_back(a.label + " by " + describe_ratio(r));
    } else {
      char buf[96];
      std::snprintf(buf, sizeof buf, " (%.2fx, 95 %% interval %.2f-%.2f, %d rounds)", r.ratio, r.lo,
                    r.hi, r.rounds);
      level.push_back(a.label + buf);
    }
  }
  std::string out;
  if (!beat.empty()) out += "; it beat " + strings::join(beat, ", ");
  if (!level.empty()) out += "; it was not significantly faster than " + strings::join(level, ", ");
  if (!ahead.empty()) out += "; it was ahead of " + strings::join(ahead, ", ");
  for (const std::string& f : faster) out += "; " + f;
  return out;
}

// The outcome when the budget left every candidate unmeasured: the recipe's reference
// settings (the first candidate), said so.
RecipeTuneOutcome unmeasured_outcome(const RecipeTuneRequest& req,
                                     const std::vector<RecipeCandidate>& candidates,
                                     const json& f) {
  RecipeTuneOutcome o;
  o.candidates = candidates;
  o.trials = f;
  o.winner = 0;
  o.ranks = f.value("ranks", req.job.nodes * req.job.ranks_per_node);
  o.budget_exhausted = true;
  o.skipped = static_cast<int>(candidates.size());
  o.tuning_s = f.value("tuning_s", 0.0);
  for (size_t i = 1; i < candidates.size(); ++i) {
    RecipeAlternative a;
    a.label = candidates[i].label;
    a.skipped = true;
    a.reason = "not measured: the budget ran out first";
    o.alternatives.push_back(a);
  }
  o.plan = req.base;
  o.plan.set_job(req.job);
  o.plan.training = candidates.front().training;
  if (candidates.front().layout) o.plan.parallel = *candidates.front().layout;
  o.plan.provenance.source = recipes::PlanSource::kTuned;
  o.plan.provenance.reason =
      "not measured: the tune.budget ran out before the first trial finished (setting up the "
      "ranks and the first trainer took it all), so the plan is the reference settings " +
      candidates.front().label + "; a larger tune.budget measures the " +
      std::to_string(candidates.size()) + " candidates";
  o.plan.provenance.budget_cut =
      "all " + std::to_string(candidates.size()) + " candidates not measured";
  return o;
}

// Per candidate: its trials by round.
using TrialsByRound = std::map<int, const TrialRecord*>;

// The trials file's figures about the search as a whole (ranks, rounds, budget, times) into
// `o`, the request's where the file has none.
void read_search_figures(const RecipeTuneRequest& req, const json& f, RecipeTuneOutcome& o) {
  o.ranks = f.value("ranks", req.job.nodes * req.job.ranks_per_node);
  o.rounds = f.value("rounds", 0);
  o.grid = f.value("grid", req.grid);
  o.budget_exhausted = f.value("budget_exhausted", false);
  o.skipped = f.value("skipped", 0);
  o.extra_cycles = f.value("extra_cycles", 0);
  o.tuning_s = f.value("tuning_s", 0.0);
  o.trial_s = f.value("trial_s", 0.0);
  o.setup_s = f.value("setup_s", 0.0);
}

// Every candidate but the winner against the winner, into o.alternatives (in candidate order):
// its last trial, and the winner's throughput ratio over every cycle both ran (the figures the
// search decided on; `intervals` gets each such ratio's interval), else in its last round.
void compare_alternatives(const std::vector<TrialRecord>& ts,
                          const std::vector<RecipeCandidate>& candidates,
                          const std::map<size_t, TrialsByRound>& by, RecipeTuneOutcome& o,
                          std::vector<stats::RatioInterval>& intervals) {
  const TrialsByRound& mine = by.at(o.winner);
  const double work_w = static_cast<double>(candidates[o.winner].training.global_batch);
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i == o.winner) continue;
    RecipeAlternative a;
    a.label = candidates[i].label;
    auto it = by.find(i);
    if (it == by.end()) {
      a.failed = true;
      a.reason = "not measured";
      o.alternatives.push_back(a);
      continue;
    }
    const TrialRecord* t = it->second.rbegin()->second;
    a.round = t->round;
    a.samples_per_s = t->samples_per_s;
    a.failed = t->failed;
    a.skipped = t->skipped;
    a.reason = t->reason;
    if (!t->failed && !t->skipped && t->samples_per_s > 0) {
      // Over every cycle both ran: the figures the search decided on.
      const stats::RatioInterval r = compare_trials(
          ts, o.winner, i, work_w, static_cast<double>(candidates[i].training.global_batch));
      if (r.rounds > 0 && r.ratio > 0) {
        a.ratio = r.ratio;
        a.rounds = r.rounds;
        a.lo = r.rounds >= stats::kMinPairedRounds ? r.lo : 0;
        a.hi = std::isfinite(r.hi) ? r.hi : 0;
        intervals.push_back(r);
      } else if (auto wt = mine.find(t->round); wt != mine.end()) {
        a.ratio = wt->second->samples_per_s / t->samples_per_s;
      }
    }
    o.alternatives.push_back(a);
  }
}

// The tuned plan's reason: who won what over how many, the closest rivals, the failures, the
// extra rounds and what the budget cut (also written to pv.budget_cut). `mine` is the winner's
// trials, `last` its last one.
std::string tuned_reason(const RecipeTuneOutcome& o, const std::vector<RecipeCandidate>& candidates,
                         const TrialsByRound& mine, const TrialRecord* last,
                         recipes::Provenance& pv) {
  size_t failures = 0;
  for (const RecipeAlternative& a : o.alternatives) failures += a.failed ? 1 : 0;
  std::string reason = candidates[o.winner].label + " won " + (o.grid ? "the grid" : "halving") +
                       " over " + std::to_string(candidates.size()) +
                       (candidates.size() == 1 ? " candidate at " : " candidates at ") +
                       fmt_sps(last->samples_per_s) + " samples/s" + closest_text(o.alternatives);
  if (failures > 0) reason += "; " + std::to_string(failures) + " failed";
  if (o.extra_cycles > 0) {
    reason +=
        "; the finalists ran " + std::to_string(o.extra_cycles) + " more rounds to tell them apart";
  }
  if (o.skipped > 0) {
    pv.budget_cut = std::to_string(o.skipped) + " of " + std::to_string(candidates.size()) +
                    " candidates not measured";
    reason += "; the budget left " + std::to_string(o.skipped) +
              " candidates unmeasured (a larger tune.budget measures them)";
  } else if (o.budget_exhausted) {
    int steps = 0;
    for (const auto& [round, t] : mine) steps += t->steps;
    pv.budget_cut = "halving stopped in round " + std::to_string(last->round + 1) + " of its " +
                    "schedule after " + std::to_string(steps) + " steps of the winner";
    reason += "; cut short by the budget in round " + std::to_string(last->round + 1) + " after " +
              std::to_string(steps) + " steps of the winner (a larger tune.budget measures longer)";
  }
  return reason;
}

// The confidence the plan records: against the closest rival measured (the smallest ratio);
// none when no rival was measured.
std::optional<recipes::Confidence> rival_confidence(const std::vector<RecipeAlternative>& alts) {
  const RecipeAlternative* rival = nullptr;
  for (const RecipeAlternative& a : alts) {
    if (a.failed || a.skipped || !(a.ratio > 0)) continue;
    if (rival == nullptr || a.ratio < rival->ratio) rival = &a;
  }
  if (rival == nullptr) return std::nullopt;
  recipes::Confidence c;
  c.rival = rival->label;
  c.ratio = rival->ratio;
  c.lo = rival->lo;
  c.hi = rival->hi;
  c.rounds = rival->rounds;
  c.significant = rival->hi > 0 && (rival->lo > 1.0 || rival->hi < 1.0);
  return c;
}

}  // namespace

Result<RecipeTuneOutcome> outcome_from_trials(const RecipeTuneRequest& req,
                                              const std::vector<RecipeCandidate>& candidates,
                                              const json& f) {
  RecipeTuneOutcome o;
  o.candidates = candidates;
  o.trials = f;
  auto fail = [](const Error& e) { return internal_error("trials file: " + e.message()); };
  auto ts = trials_from_json(f.contains("trials") ? f["trials"] : json());
  if (!ts) return fail(ts.error());
  for (const TrialRecord& t : *ts) {
    if (t.candidate >= candidates.size()) {
      return internal_error("trials file: candidate " + std::to_string(t.candidate) +
                            " is out of range (" + std::to_string(candidates.size()) +
                            " candidates)");
    }
  }
  auto w = choose_winner(*ts);
  if (!w && w.error().kind() == ErrorKind::kNotFound && !candidates.empty()) {
    return unmeasured_outcome(req, candidates, f);
  }
  if (!w) return w.error();
  o.winner = *w;
  read_search_figures(req, f, o);

  std::map<size_t, TrialsByRound> by;
  for (const TrialRecord& t : *ts) by[t.candidate][t.round] = &t;
  const TrialsByRound& mine = by[o.winner];
  const TrialRecord* last = mine.rbegin()->second;
  // The prediction for the real run: samples over time across all of the winner's trials (the
  // figure it won by), so that a long late trial weighs more than a 4-step first one.
  double samples = 0, seconds = 0;
  for (const auto& [round, t] : mine) {
    samples += t->steps * t->samples_per_s * t->step_s;
    seconds += t->steps * t->step_s;
  }
  std::vector<stats::RatioInterval> intervals;
  compare_alternatives(*ts, candidates, by, o, intervals);

  o.plan = req.base;
  o.plan.set_job(req.job);
  o.plan.training = candidates[o.winner].training;
  if (const auto& l = candidates[o.winner].layout) {
    o.plan.parallel = *l;
    o.plan.parallel.measured_sps = last->samples_per_s;
    char buf[128];
    std::snprintf(buf, sizeof buf, "; measured %s samples/s in the trials, the fastest of %zu",
                  fmt_sps(last->samples_per_s).c_str(), candidates.size());
    o.plan.parallel.reason =
        l->reason + buf + (candidates.size() == 1 ? " candidate" : " candidates");
  }
  recipes::Provenance& pv = o.plan.provenance;
  pv.source = recipes::PlanSource::kTuned;
  const std::string reason = tuned_reason(o, candidates, mine, last, pv);
  if (auto c = rival_confidence(o.alternatives)) pv.confidence = *c;
  pv.regret = training_regret(intervals);
  pv.reason = reason;
  pv.measured_sps = last->samples_per_s;
  pv.predicted_sps = seconds > 0 ? samples / seconds : last->samples_per_s;
  return o;
}

}  // namespace dltune::tuner
