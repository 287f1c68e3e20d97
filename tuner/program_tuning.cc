// Tuning a user's program by short runs of it (tuner/program_tuning.h): reading the throughput
// it reports, the successive-halving loop, and the outcome as a reason and a table (its
// database rows are program_candidates.cc's, beside the plan).
//
// How it works. tune_program() hands common/halving.h's Search every candidate with one
// sample per step, and records a trial of `steps` steps at S samples/s as `steps / S` seconds,
// so that the Search ranks by the throughput the program itself reported (samples over time
// across all of a candidate's trials), whatever the program counts as a step. The Search
// orders each round (candidates of one ranks-per-node x threads shape spread apart), halves
// the field and grows the trials; tune_program() owns the clock: before each trial it
// estimates the trial's wall time (the candidate's last trial scaled to the new length, else
// the mean of this round's trials so far, start-up included) and skips it when it would end
// past the budget, ending the round as cut short. The Search's own budget is unbounded: it
// only sees the programs' step times, never their start-up. A trial that fails, or reports
// no positive throughput, fails its candidate with the reason. With screening, the first round
// is run_screened_round(): the design's trials, the model (tuner/screening.h), then only the
// trials it cannot rule out, the others set aside in the Search.
#include "tuner/program_tuning.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/halving.h"
#include "common/number_text.h"
#include "common/strings.h"
#include "tuner/screening.h"

namespace dltune::tuner {
namespace {

constexpr size_t kMaxLineBytes = 4096;   // of a line the throughput pattern is matched against
constexpr size_t kMaxReasonBytes = 300;  // of one trial's reason quoted in the outcome
constexpr size_t kListedFailures = 3;    // failures the outcome's reason names
constexpr size_t kTailLines = 10;        // of a failed trial's output in the table

// "1,234": a throughput in the reasons, rounded with its thousands separated
// (strings::thousands); below 100, one decimal ("12.5").
std::string fmt_sps(double v) {
  if (!std::isfinite(v) || v < 99.95 || v > 1e18) {
    char b[64];
    std::snprintf(b, sizeof b, v < 99.95 ? "%.1f" : "%g", v);
    return b;
  }
  return strings::thousands(v);
}

// "1.12x": a ratio in the reasons.
std::string fmt_ratio(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2fx", v);
  return b;
}

// `s` fit for a reason on one line: cut to `max` bytes ("..." appended), and each byte of
// anything a terminal would act on (strings::find_control: controls, bidi overrides, broken
// UTF-8) turned into a space.
std::string one_line(std::string_view s, size_t max) {
  std::string t(s.substr(0, max));
  for (size_t p = strings::find_control(t); p != std::string::npos; p = strings::find_control(t)) {
    t[p] = ' ';
  }
  t = strings::trim(t);
  return s.size() > max ? t + "..." : t;
}

// The lines of `text`, split at '\n' and '\r' (a progress bar rewrites its line with '\r'),
// empty ones left out.
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n' || text[i] == '\r') {
      if (i > start) out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::string quote_text(std::string_view s) { return "'" + one_line(s, 60) + "'"; }

// `text` as a finite number > 0, the whole of it (surrounding blanks aside).
Result<double> positive_number(std::string_view text) {
  const std::string t = strings::trim(text);
  char* end = nullptr;
  const double v = t.empty() ? 0 : std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v) || !(v > 0)) {
    return invalid_input(quote_text(t) + " is not a number > 0");
  }
  return v;
}

}  // namespace

Result<double> throughput_from_output(std::string_view pattern, std::string_view output) {
  std::regex re;
  try {
    re = std::regex(std::string(pattern), std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return invalid_input("throughput pattern " + quote_text(pattern) + " is not a valid regex (" +
                         e.what() + ")");
  }
  const std::vector<std::string_view> lines = lines_of(output);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {  // the last match counts
    const std::string_view line = it->substr(0, kMaxLineBytes);
    std::cmatch m;
    try {
      if (!std::regex_search(line.data(), line.data() + line.size(), m, re)) continue;
    } catch (const std::regex_error& e) {  // too complex for a line: say so, do not crash
      return invalid_input("throughput pattern " + quote_text(pattern) + " failed on the line " +
                           quote_text(line) + " (" + e.what() + ")");
    }
    const std::csub_match& g = m.size() > 1 ? m[1] : m[0];
    auto v = positive_number(g.str());
    if (!v) return std::move(v).error().wrap("the throughput in the line " + quote_text(line));
    return v;
  }
  return not_found("printed no line matching '" + std::string(pattern) + "'");
}

Result<double> throughput_from_metrics(std::string_view key, std::string_view jsonl) {
  const std::vector<std::string_view> lines = lines_of(jsonl);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    const nlohmann::json j = nlohmann::json::parse(it->begin(), it->end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    auto f = j.find(std::string(key));
    if (f == j.end()) continue;
    auto v = f->is_number()
                 ? positive_number(f->dump())
                 : Result<double>(invalid_input(quote_text(f->dump()) + " is not a number > 0"));
    if (!v) return std::move(v).error().wrap("the metrics key '" + std::string(key) + "'");
    return v;
  }
  return not_found("no line of the metrics file has the key '" + std::string(key) + "'");
}

namespace {

// The state of one tune_program() call.
struct Tuning {
  Tuning(const std::vector<ProgramCandidate>& c, const RunProgramTrial& r,
         const ProgramTuneOptions& opt, std::function<double()> now)
      : cands(c), run_trial(r), o(opt), clock(std::move(now)) {}
  const std::vector<ProgramCandidate>& cands;
  const RunProgramTrial& run_trial;
  const ProgramTuneOptions& o;
  std::function<double()> clock;
  int64_t first_steps = 0;
  double first_trial_s = 0;
  double start = 0, end = 0;
  std::vector<double> last_wall;      // per candidate: its last trial's wall time
  std::vector<int64_t> last_steps;    // and steps (0: none yet)
  std::vector<ProgramTrialRow> rows;  // in the order they ran
  // The model's view of the candidates, for the first round's screening.
  std::vector<screening::Levels> levels;  // per candidate
  std::vector<std::string> factors;       // the factors that vary, named
  // The outcome being built: the screened round writes its screening fields.
  ProgramTuneOutcome out;
};

// The candidates as the screening model sees them: each one's level in each factor that varies
// (batch, ranks x threads, bucket), levels numbered in order of first appearance; the factors'
// names in `names`.
std::vector<screening::Levels> program_levels(const std::vector<ProgramCandidate>& cands,
                                              std::vector<std::string>* names) {
  using Value = std::pair<double, double>;  // a factor's value: (batch or rpn or bucket, threads)
  const auto factor = [](const recipes::ProgramValues& v, int f) -> Value {
    if (f == 0) return {static_cast<double>(v.batch), 0};
    if (f == 1) return {v.ranks_per_node, v.threads_per_rank};
    return {v.bucket_mb, 0};
  };
  static const char* const kNames[] = {"batch", "ranks x threads", "bucket"};
  std::vector<screening::Levels> out(cands.size());
  for (int f = 0; f < 3; ++f) {
    std::map<Value, int> level;
    std::vector<int> of(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      of[i] = level.try_emplace(factor(cands[i].values, f), static_cast<int>(level.size()))
                  .first->second;
    }
    if (level.size() < 2) continue;
    names->push_back(kNames[f]);
    for (size_t i = 0; i < cands.size(); ++i) out[i].push_back(of[i]);
  }
  return out;
}

Status check_options(const ProgramTuneOptions& o, size_t candidates) {
  if (candidates == 0) return invalid_input("the program's search has no candidate");
  if (o.eta < 2)
    return invalid_input("tuning a program needs eta >= 2, got " + std::to_string(o.eta));
  if (o.first_steps < 1 || o.first_steps > INT_MAX / 8) {
    return invalid_input("a first trial needs 1 to " + std::to_string(INT_MAX / 8) +
                         " steps, got " + std::to_string(o.first_steps));
  }
  if (!(o.budget_s > 0)) return invalid_input("tuning a program needs a budget > 0 s");
  return ok_status();
}

// The Search's view: one sample per step, grouped by (ranks per node, threads).
std::vector<halving::Candidate> search_candidates(const std::vector<ProgramCandidate>& cands) {
  std::map<std::pair<int, int>, size_t> groups;
  std::vector<halving::Candidate> out;
  for (const ProgramCandidate& c : cands) {
    const auto shape = std::make_pair(c.values.ranks_per_node, c.values.threads_per_rank);
    halving::Candidate h;
    h.work_per_step = 1;
    h.group = groups.try_emplace(shape, groups.size()).first->second;
    out.push_back(h);
  }
  return out;
}

// Runs candidate i's trial of `steps` steps in round `round` and tells the Search.
void run_one(Tuning& t, halving::Search& s, size_t i, int round, int steps) {
  const double trial_s =
      t.first_trial_s * static_cast<double>(steps) / static_cast<double>(t.first_steps);
  const double t0 = t.clock();
  if (t.rows.empty()) t.start = t0;
  ProgramTrialResult r = t.run_trial(t.cands[i], steps, trial_s, t.o.timeout_s);
  t.end = t.clock();
  ProgramTrialRow row;
  row.candidate = i;
  row.round = round;
  row.steps = steps;
  row.wall_s = std::isfinite(r.wall_s) && r.wall_s > 0 ? r.wall_s : std::max(0.0, t.end - t0);
  const bool measured = std::isfinite(r.samples_per_s) && r.samples_per_s > 0;
  if (r.failed || !measured) {
    row.failed = true;
    row.reason = r.failed ? (r.reason.empty() ? "failed" : r.reason)
                          : "reported no throughput > 0 (" + fmt_sps(r.samples_per_s) + ")";
    row.output_tail = std::move(r.output_tail);
    s.fail(i, row.reason);
  } else {
    row.samples_per_s = r.samples_per_s;
    s.record(i, static_cast<double>(steps) / r.samples_per_s, steps);
  }
  t.last_wall[i] = row.wall_s;
  t.last_steps[i] = steps;
  t.rows.push_back(std::move(row));
}

// A round's running totals, for the budget's estimates.
struct RoundRun {
  double wall = 0;
  int ran = 0;
  bool cut = false;  // a trial was left out for the budget
};

// Candidate i's trial of the current round, unless it failed, or (outside the grid, after the
// very first trial) its estimated wall time would end past the budget.
void maybe_run(Tuning& t, halving::Search& s, size_t i, RoundRun& rr) {
  if (s.failed(i)) return;
  const int steps = s.steps();
  if (!t.o.grid && !t.rows.empty()) {
    double est = rr.ran > 0 ? rr.wall / rr.ran : 0;
    if (t.last_steps[i] > 0) {
      est = t.last_wall[i] * static_cast<double>(steps) / static_cast<double>(t.last_steps[i]);
    }
    if (t.clock() - t.start + est > t.o.budget_s) {
      rr.cut = true;
      return;
    }
  }
  run_one(t, s, i, s.rounds(), steps);
  rr.wall += t.rows.back().wall_s;
  ++rr.ran;
}

// One round of the Search: each candidate's trial, within the budget.
void run_round(Tuning& t, halving::Search& s) {
  RoundRun rr;
  for (size_t i : s.order()) maybe_run(t, s, i, rr);
  s.end_round(t.clock() - t.start, rr.cut);
}

// The first round, screened (program_tuning.h): the design's trials, the model fitted to them,
// then the trials of the candidates it cannot rule out; the others set aside.
void run_screened_round(Tuning& t, halving::Search& s) {
  ProgramTuneOutcome& sc = t.out;
  const std::vector<size_t> order = s.order();
  std::vector<bool> in_design(t.cands.size(), false);
  for (size_t i : sc.design) in_design[i] = true;
  RoundRun rr;
  for (size_t i : order) {
    if (in_design[i]) maybe_run(t, s, i, rr);
  }
  std::vector<std::pair<size_t, double>> measured;
  for (const ProgramTrialRow& r : t.rows) {
    if (!r.failed) measured.emplace_back(r.candidate, r.samples_per_s);
  }
  auto model = measured.empty() ? Result<screening::Fit>(invalid_input("no candidate measured"))
                                : screening::fit(t.levels, measured);
  // Nothing to predict from (every design candidate failed), or a model the design itself
  // contradicts (the program's settings interact): the rest are measured.
  if (model) sc.model_rms = model->rms;
  if (!model || model->rms > kScreeningMaxResidual) {
    sc.screening_note = "screening: every candidate of its design failed; the rest measured";
    if (model) {
      char b[256];
      std::snprintf(b, sizeof b,
                    "screening: the additive model did not fit its design (residual %.1f %%, "
                    "above %.0f %%): the settings interact; every candidate measured",
                    100 * model->rms, 100 * kScreeningMaxResidual);
      sc.screening_note = b;
    }
    for (size_t i : order) {
      if (!in_design[i]) maybe_run(t, s, i, rr);
    }
    s.end_round(t.clock() - t.start, rr.cut);
    return;
  }
  double best = 0;
  for (const auto& m : measured) best = std::max(best, std::log(m.second));
  sc.margin = 2 * std::max(model->rms, kScreeningNoise);
  size_t promoted = 0;
  for (size_t i : order) {
    if (in_design[i] || s.failed(i)) continue;
    const std::optional<double> pred = screening::predict(*model, t.levels[i]);
    if (pred) sc.predicted_sps[i] = *pred;
    if (!pred || std::log(*pred) + sc.margin >= best) {
      ++promoted;
      maybe_run(t, s, i, rr);
    } else {
      s.set_aside(i);
      sc.set_aside.push_back(i);
    }
  }
  char b[512];
  std::snprintf(b, sizeof b,
                "screening: %zu of %zu candidates measured first (a design for an additive model "
                "of log throughput over %s; residual %.1f %%); of the other %zu, %zu measured "
                "(predicted within %.0f %% of the best measured, or not predictable), %zu set "
                "aside unmeasured",
                sc.design.size(), t.cands.size(), strings::join(t.factors, ", ").c_str(),
                100 * sc.model_rms, t.cands.size() - sc.design.size(), promoted,
                100 * (1 - std::exp(-sc.margin)), sc.set_aside.size());
  sc.screening_note = b;
  s.end_round(t.clock() - t.start, rr.cut);
}

// Per candidate: the last round it ran successfully (-1: none).
std::vector<int> last_good_round(const ProgramTuneOutcome& o) {
  std::vector<int> last(o.candidates.size(), -1);
  for (const ProgramTrialRow& r : o.trials) {
    if (!r.failed && r.candidate < last.size())
      last[r.candidate] = std::max(last[r.candidate], r.round);
  }
  return last;
}

// Per candidate: samples/s over all its successful trials (0: none), as the Search ranks them.
std::vector<double> rates(const ProgramTuneOutcome& o) {
  std::vector<double> steps(o.candidates.size(), 0), secs(o.candidates.size(), 0), out(steps);
  for (const ProgramTrialRow& r : o.trials) {
    if (r.failed || r.candidate >= out.size()) continue;
    steps[r.candidate] += static_cast<double>(r.steps);
    secs[r.candidate] += static_cast<double>(r.steps) / r.samples_per_s;
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = secs[i] > 0 ? steps[i] / secs[i] : 0;
  return out;
}

// The failures, one per failed candidate: "label: reason" (its last failing trial's reason).
std::vector<std::string> failure_list(const ProgramTuneOutcome& o) {
  std::map<size_t, std::string> why;
  for (const ProgramTrialRow& r : o.trials) {
    if (r.failed)
      why[r.candidate] =
          o.candidates[r.candidate].label + ": " + one_line(r.reason, kMaxReasonBytes);
  }
  std::vector<std::string> out;
  for (auto& [i, w] : why) out.push_back(std::move(w));
  return out;
}

std::string outcome_reason(const ProgramTuneOutcome& o) {
  const size_t n = o.candidates.size();
  std::string s = o.candidates[o.winner].label + " won " + (o.grid ? "the grid" : "halving") +
                  " over " + std::to_string(n) + (n == 1 ? " candidate" : " candidates") + " at " +
                  fmt_sps(o.winner_sps) + " samples/s";
  // The runner-up: the candidate that got furthest without failing, then the fastest.
  const std::vector<int> last = last_good_round(o);
  const std::vector<double> rate = rates(o);
  const std::vector<std::string> failures = failure_list(o);
  std::optional<size_t> up;
  for (size_t i = 0; i < n; ++i) {
    bool failed = false;
    for (const ProgramTrialRow& r : o.trials) failed = failed || (r.failed && r.candidate == i);
    if (i == o.winner || failed || last[i] < 0) continue;
    if (!up || std::pair(last[i], rate[i]) > std::pair(last[*up], rate[*up])) up = i;
  }
  if (up) {
    s += "; runner-up " + o.candidates[*up].label + " at " + fmt_sps(rate[*up]) + " (" +
         fmt_ratio(o.winner_sps / rate[*up]) + ")";
  }
  if (!failures.empty()) {
    std::vector<std::string> named(
        failures.begin(),
        failures.begin() + static_cast<std::ptrdiff_t>(std::min(failures.size(), kListedFailures)));
    if (failures.size() > named.size()) {
      named.push_back("and " + std::to_string(failures.size() - named.size()) + " more");
    }
    s += "; " + std::to_string(failures.size()) + " failed (" + strings::join(named, ", ") + ")";
  }
  if (!o.set_aside.empty()) {
    s += "; " + std::to_string(o.set_aside.size()) + " set aside unmeasured by the screening model";
  }
  if (!o.skipped.empty()) {
    s += "; " + std::to_string(o.skipped.size()) + " not measured (budget)";
  } else if (o.budget_exhausted) {
    s += "; cut short by the budget in round " + std::to_string(o.rounds);
  }
  return one_line(s, recipes::kMaxPlanTextBytes - 16);
}

}  // namespace

Result<ProgramTuneOutcome> tune_program(const std::vector<ProgramCandidate>& candidates,
                                        const RunProgramTrial& run_trial,
                                        const ProgramTuneOptions& options,
                                        const std::function<double()>& now) {
  DLTUNE_TRY(check_options(options, candidates.size()));
  Tuning t(candidates, run_trial, options, now);
  if (!t.clock) {
    t.clock = [] {
      using namespace std::chrono;
      return duration<double>(steady_clock::now().time_since_epoch()).count();
    };
  }
  t.first_steps = options.first_steps;
  t.first_trial_s = options.first_trial_seconds > 0
                        ? options.first_trial_seconds
                        : std::max(2.0, options.budget_s / (2.0 * candidates.size()));
  t.last_wall.assign(candidates.size(), 0);
  t.last_steps.assign(candidates.size(), 0);
  halving::Options h;
  h.grid = options.grid;
  h.eta = options.eta;
  h.min_steps = static_cast<int>(options.first_steps);
  h.max_steps = static_cast<int>(std::clamp<int64_t>(
      options.max_steps > 0 ? options.max_steps : options.first_steps * 8, h.min_steps, INT_MAX));
  h.warmup_steps = 0;
  h.budget_s = 1e30;  // the budget is kept here, on wall times (start-up included)
  // Racing with the screening: a survivor measured more than twice a short trial's noise below
  // the round's best is not measured again.
  if (options.screening && !options.grid) h.drop_below = std::exp(-2 * kScreeningNoise);
  halving::Search s(search_candidates(candidates), h);
  ProgramTuneOutcome& o = t.out;
  if (options.screening && !options.grid) {
    t.levels = program_levels(candidates, &t.factors);
    o.design = screening::design(t.levels, kScreeningExtra);
    o.screened = !o.design.empty();
    o.predicted_sps.assign(o.screened ? candidates.size() : 0, 0);
  }
  if (o.screened && !s.done()) run_screened_round(t, s);
  while (!s.done()) run_round(t, s);

  o.candidates = candidates;
  o.trials = std::move(t.rows);
  o.rounds = s.rounds();
  o.grid = options.grid;
  o.budget_exhausted = s.budget_exhausted();
  o.tuning_s = std::max(0.0, t.end - t.start);
  // A set-aside candidate that ran later (every measured one failed) is measured, not aside.
  std::erase_if(o.set_aside, [&](size_t i) { return t.last_steps[i] != 0; });
  std::vector<bool> aside(candidates.size(), false);
  for (size_t i : o.set_aside) aside[i] = true;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (t.last_steps[i] == 0 && !aside[i]) o.skipped.push_back(i);
  }
  const int w = s.winner();
  if (w < 0 || !(s.rate(static_cast<size_t>(w)) > 0)) {
    std::string why = strings::join(failure_list(o), "; ");
    if (!o.skipped.empty()) {
      why += "; " + std::to_string(o.skipped.size()) + " not measured (the budget ran out)";
    }
    return peer_failed("every candidate of the program's search failed: " + why);
  }
  o.winner = static_cast<size_t>(w);
  o.winner_sps = s.rate(o.winner);
  o.reason = outcome_reason(o);
  return std::move(o);
}

std::string format_program_outcome(const ProgramTuneOutcome& o) {
  const size_t n = o.candidates.size();
  char head[160];
  std::snprintf(head, sizeof head, "%s over %zu candidate%s in %d round%s, %.1f s%s\n",
                o.grid ? "grid" : "halving", n, n == 1 ? "" : "s", o.rounds,
                o.rounds == 1 ? "" : "s", o.tuning_s,
                o.budget_exhausted ? " (the budget ran out)" : "");
  const std::vector<int> last = last_good_round(o);
  const std::vector<double> rate = rates(o);
  std::vector<const ProgramTrialRow*> failed(n, nullptr);
  std::vector<int> ran(n, -1);
  for (const ProgramTrialRow& r : o.trials) {
    if (r.candidate >= n) continue;
    ran[r.candidate] = std::max(ran[r.candidate], r.round);
    if (r.failed) failed[r.candidate] = &r;
  }
  std::vector<std::vector<std::string>> rows = {
      {"candidate", "round", "samples/s", "vs winner", ""}};
  for (size_t i = 0; i < n; ++i) {
    std::string note = i == o.winner ? "winner" : "";
    if (failed[i]) note = "failed: " + one_line(failed[i]->reason, kMaxReasonBytes);
    if (ran[i] < 0) note = "not measured (budget)";
    if (ran[i] < 0 && std::find(o.set_aside.begin(), o.set_aside.end(), i) != o.set_aside.end()) {
      note = "set aside: the model predicts " + fmt_sps(o.predicted_sps[i]);
      if (o.winner_sps > 0) note += " (" + fmt_ratio(o.predicted_sps[i] / o.winner_sps) + ")";
    }
    rows.push_back({o.candidates[i].label, ran[i] < 0 ? "-" : std::to_string(ran[i] + 1),
                    last[i] < 0 ? "-" : fmt_sps(rate[i]),
                    last[i] < 0 || !(o.winner_sps > 0) ? "-" : fmt_ratio(rate[i] / o.winner_sps),
                    note});
  }
  std::vector<size_t> width(5, 0);
  for (const auto& r : rows) {
    for (size_t c = 0; c < 5; ++c) width[c] = std::max(width[c], r[c].size());
  }
  std::string out = head;
  if (o.screened) out += one_line(o.screening_note, 600) + "\n";
  for (size_t k = 0; k < rows.size(); ++k) {
    const auto& r = rows[k];
    std::string line = r[0] + std::string(width[0] - r[0].size(), ' ');
    for (size_t c = 1; c < 4; ++c) line += "  " + std::string(width[c] - r[c].size(), ' ') + r[c];
    out += strings::trim(line + "  " + r[4]) + "\n";
    const ProgramTrialRow* f = k > 0 ? failed[k - 1] : nullptr;
    if (f == nullptr || f->output_tail.empty()) continue;
    std::vector<std::string_view> tail = lines_of(f->output_tail);
    const size_t from = tail.size() > kTailLines ? tail.size() - kTailLines : 0;
    for (size_t l = from; l < tail.size(); ++l) out += "    | " + one_line(tail[l], 200) + "\n";
  }
  return out;
}

}  // namespace dltune::tuner
