#include "tuner/recipe_tuning.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "common/halving.h"
#include "common/log.h"
#include "common/stats.h"
#include "common/strings.h"
#include "tuner/plan_confidence.h"

namespace dltune::tuner {
namespace {

using json = nlohmann::json;
using recipes::Scaling;
using recipes::TrainingPlan;

// Assigns the value of a Result expression to `lhs`, or returns its error.
#define RT_ASSIGN(lhs, expr)                          \
  do {                                                \
    auto rt_r_ = (expr);                              \
    if (!rt_r_.ok()) return std::move(rt_r_).error(); \
    lhs = std::move(*rt_r_);                          \
  } while (0)

// `t` read as the training of a data-parallel plan for `base`'s job.
Result<TrainingPlan> training_from_json(const recipes::Plan& base, const json& t) {
  recipes::Plan dp = base;
  dp.parallel = recipes::ParallelLayout{};
  dp.set_job(base.job);
  json p = recipes::plan_to_json(dp);
  p["training"] = t;
  auto plan = recipes::plan_from_json(p);
  if (!plan) return plan.error();
  return plan->training;
}

template <typename T>
Result<T> get(const json& j, const char* key, const char* where) {
  if (!j.is_object() || !j.contains(key)) {
    return invalid_input(std::string(where) + ": missing '" + key + "'");
  }
  try {
    return j.at(key).get<T>();
  } catch (const std::exception& e) {
    return invalid_input(std::string(where) + ": '" + key + "' has the wrong type");
  }
}

std::string fmt_ratio(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2fx", v);
  return b;
}

}  // namespace

json training_json(const TrainingPlan& t) {
  recipes::Plan p;
  p.training = t;
  return recipes::plan_to_json(p)["training"];
}

json candidate_json(const RecipeCandidate& k, const recipes::Plan& base) {
  json j = {{"label", k.label}, {"training", training_json(k.training)}};
  if (k.layout) {
    recipes::Plan p = base;
    p.parallel = *k.layout;
    j["parallel"] = recipes::plan_to_json(p)["parallel"];
  }
  return j;
}

Result<size_t> choose_winner(const std::vector<TrialRecord>& trials) {
  std::set<size_t> failed;  // failed or never measured
  bool any_failed = false;
  for (const TrialRecord& t : trials) {
    if (t.failed || t.skipped) failed.insert(t.candidate);
    any_failed = any_failed || t.failed;
  }
  int last_round = -1;
  for (const TrialRecord& t : trials) {
    if (!failed.count(t.candidate)) last_round = std::max(last_round, t.round);
  }
  if (last_round < 0 && !any_failed) {
    return not_found("no candidate was measured: the budget ran out before the first trial");
  }
  if (last_round < 0) {
    std::string why;
    for (const TrialRecord& t : trials) {
      if (t.failed) why += (why.empty() ? "" : "; ") + t.label + ": " + t.reason;
    }
    return peer_failed("every candidate configuration failed" +
                       (why.empty() ? std::string(" (no trial ran)") : " (" + why + ")"));
  }
  // Samples over time across every trial of each finalist.
  std::map<size_t, std::pair<double, double>> totals;  // candidate -> (samples, seconds)
  for (const TrialRecord& t : trials) {
    auto& [samples, seconds] = totals[t.candidate];
    samples += t.steps * t.samples_per_s * t.step_s;
    seconds += t.steps * t.step_s;
  }
  size_t best = 0;
  double best_sps = -1;
  for (const TrialRecord& t : trials) {
    if (t.round != last_round || failed.count(t.candidate)) continue;
    const auto& [samples, seconds] = totals[t.candidate];
    const double sps = seconds > 0 ? samples / seconds : 0;
    if (sps > best_sps) {
      best_sps = sps;
      best = t.candidate;
    }
  }
  return best;
}

size_t trial_trainers(const std::vector<RecipeCandidate>& candidates, bool grid) {
  if (grid) return candidates.size();
  std::vector<const RecipeCandidate*> families;  // one member of each
  for (const RecipeCandidate& k : candidates) {
    auto alike = [&](const RecipeCandidate* f) { return trains_alike(*f, k); };
    if (std::none_of(families.begin(), families.end(), alike)) families.push_back(&k);
  }
  return families.size();
}

TrialSchedule schedule_for(const RecipeTuneRequest& req, size_t candidates, size_t trainers,
                           int64_t gradient_bytes) {
  TrialSchedule t;
  halving::Options& s = t.halving;
  s.grid = req.grid;
  s.budget_s = req.budget_s;
  if (req.min_steps > 0) s.min_steps = req.min_steps;
  if (candidates == 1 && req.min_steps <= 0)
    s.min_steps = std::max(s.min_steps, kSettledTrialSteps);
  // The longest trial (the grid's length): min_steps grown eta-fold for every round halving
  // runs (common/halving.h: each keeps the best 1/eta, rounded up, at least two, until a round
  // compares two), at most 108.
  int steps = s.min_steps;
  for (size_t n = candidates; n > 2; n = halving::survivors(n, s.eta)) steps *= s.eta;
  s.max_steps = req.max_steps > 0 ? std::max(req.max_steps, s.min_steps)
                                  : std::max(s.min_steps, std::min(steps, 108));
  // Every trainer at once: parameters, gradients and momentum (3 x f32) plus slack for
  // activations; keep them when that stays under 2 GiB, and under the recipe's
  // launch.memory_per_rank when it sets one (a model that needs a pipeline to fit would
  // otherwise hold several trainers where one barely fits).
  const double bytes = 4.0 * static_cast<double>(gradient_bytes) * static_cast<double>(trainers);
  s.keep_built = bytes < 2.0 * static_cast<double>(uint64_t{1} << 30);
  const auto limit = static_cast<double>(req.recipe.launch.memory_per_rank);
  if (limit > 0 && trainers > 1 && bytes >= limit) s.keep_built = false;
  return t;
}

std::vector<db::RecipeTrial> recipe_trial_rows(const RecipeTuneOutcome& o, const db::Key& key,
                                               const db::Provenance& provenance) {
  std::vector<db::RecipeTrial> rows;
  auto ts = trials_from_json(o.trials.contains("trials") ? o.trials["trials"] : json());
  if (!ts) return rows;
  for (const TrialRecord& t : *ts) {
    // A candidate the budget left unmeasured has no trial to store (the plan's reason and
    // budget say what was cut).
    if (t.candidate >= o.candidates.size() || t.skipped) continue;
    const TrainingPlan& c = o.candidates[t.candidate].training;
    db::RecipeTrial r;
    r.key = key;
    r.round = t.round;
    r.candidate = static_cast<int64_t>(t.candidate);
    r.label = db::clean_text(o.candidates[t.candidate].label);
    r.per_rank_batch = c.per_rank_batch;
    r.global_batch = c.global_batch;
    r.scaling = std::string(recipes::scaling_name(c.scaling));
    r.bucket_bytes = c.bucket_bytes;
    r.overlap = c.overlap;
    r.lr_scale = c.lr_scale;
    r.steps = t.steps;
    r.samples_per_s = t.samples_per_s;
    r.step_s = t.step_s;
    r.median_sps = t.median_sps;
    r.iqr_sps = t.iqr_sps;
    r.compute_s = t.compute_s;
    r.exposed_comm_s = t.exposed_comm_s;
    r.allreduce_s = t.allreduce_s;
    r.memory_estimate_bytes = t.memory_estimate_bytes;
    r.memory_peak_bytes = t.memory_peak_bytes;
    r.failed = t.failed;
    r.reason = db::clean_text(t.reason);
    r.provenance = provenance;
    if (Status ok = db::validate_trial(r); !ok.ok()) {
      // A trial the database would refuse (say, an infinite throughput) must not cost the plan.
      DLTUNE_LOG(kWarn, "tuner") << "not storing trial '" << r.label << "' (round " << r.round
                                 << "): " << ok.error().message();
      continue;
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

json recipe_outcome_to_json(const RecipeTuneOutcome& o) {
  json cands = json::array();
  for (const RecipeCandidate& c : o.candidates) cands.push_back(candidate_json(c, o.plan));
  json alts = json::array();
  for (const RecipeAlternative& a : o.alternatives) {
    alts.push_back({{"label", a.label},
                    {"samples_per_s", a.samples_per_s},
                    {"ratio", a.ratio},
                    {"lo", a.lo},
                    {"hi", a.hi},
                    {"rounds", a.rounds},
                    {"round", a.round},
                    {"failed", a.failed},
                    {"skipped", a.skipped},
                    {"reason", a.reason}});
  }
  return {{"plan", recipes::plan_to_json(o.plan)},
          {"candidates", cands},
          {"winner", o.winner},
          {"winner_label", o.candidates.empty() ? "" : o.candidates[o.winner].label},
          {"alternatives", alts},
          {"trials", o.trials},
          {"ranks", o.ranks},
          {"rounds", o.rounds},
          {"grid", o.grid},
          {"budget_exhausted", o.budget_exhausted},
          {"skipped", o.skipped},
          {"extra_cycles", o.extra_cycles},
          {"tuning_s", o.tuning_s},
          {"trial_s", o.trial_s},
          {"setup_s", o.setup_s}};
}

Result<RecipeTuneOutcome> recipe_outcome_from_json(const json& j) {
  RecipeTuneOutcome o;
  const char* w = "recipe outcome";
  if (!j.is_object() || !j.contains("plan")) return invalid_input("recipe outcome: missing 'plan'");
  auto plan = recipes::plan_from_json(j["plan"]);
  if (!plan) return plan.error().wrap("recipe outcome");
  o.plan = *plan;
  json cands;
  RT_ASSIGN(cands, get<json>(j, "candidates", w));
  for (const json& c : cands) {
    RecipeCandidate k;
    RT_ASSIGN(k.label, get<std::string>(c, "label", w));
    auto t = c.contains("parallel") ? Result<TrainingPlan>(TrainingPlan{})
                                    : training_from_json(o.plan, c.value("training", json()));
    if (!t) return t.error().wrap("recipe outcome: candidate '" + k.label + "'");
    k.training = *t;
    if (c.contains("parallel")) {  // its training is per replica of that layout
      json p = recipes::plan_to_json(o.plan);
      p["parallel"] = c["parallel"];
      p["training"] = c.value("training", json());
      auto with = recipes::plan_from_json(p);
      if (!with) return with.error().wrap("recipe outcome: candidate '" + k.label + "'");
      k.layout = with->parallel;
      k.training = with->training;
    }
    o.candidates.push_back(std::move(k));
  }
  RT_ASSIGN(o.winner, get<size_t>(j, "winner", w));
  if (o.winner >= o.candidates.size() && !o.candidates.empty()) {
    return invalid_input("recipe outcome: winner out of range");
  }
  for (const json& a : j.value("alternatives", json::array())) {
    RecipeAlternative x;
    RT_ASSIGN(x.label, get<std::string>(a, "label", w));
    RT_ASSIGN(x.samples_per_s, get<double>(a, "samples_per_s", w));
    RT_ASSIGN(x.ratio, get<double>(a, "ratio", w));
    RT_ASSIGN(x.round, get<int>(a, "round", w));
    RT_ASSIGN(x.failed, get<bool>(a, "failed", w));
    RT_ASSIGN(x.reason, get<std::string>(a, "reason", w));
    x.lo = a.value("lo", 0.0);
    x.hi = a.value("hi", 0.0);
    x.rounds = a.value("rounds", 0);
    x.skipped = a.value("skipped", false);
    o.alternatives.push_back(std::move(x));
  }
  o.trials = j.value("trials", json::object());
  o.ranks = j.value("ranks", 0);
  o.rounds = j.value("rounds", 0);
  o.grid = j.value("grid", false);
  o.budget_exhausted = j.value("budget_exhausted", false);
  o.skipped = j.value("skipped", 0);
  o.extra_cycles = j.value("extra_cycles", 0);
  o.tuning_s = j.value("tuning_s", 0.0);
  o.trial_s = j.value("trial_s", 0.0);
  o.setup_s = j.value("setup_s", 0.0);
  return o;
}

std::string format_recipe_outcome(const RecipeTuneOutcome& o) {
  std::string s;
  char line[256];
  std::snprintf(line, sizeof line,
                "recipe tuning on %d ranks: %zu candidates, %s, %d rounds, %.1f s (%.1f s timed "
                "steps, %.1f s set-up)%s\n",
                o.ranks, o.candidates.size(), o.grid ? "full grid" : "successive halving", o.rounds,
                o.tuning_s, o.trial_s, o.setup_s,
                o.budget_exhausted ? ", stopped by the budget" : "");
  s += line;
  std::snprintf(line, sizeof line, "  %-44s %5s %12s %9s  %-22s %s\n", "candidate", "round",
                "samples/s", "winner/it", "95 % interval (rounds)", "note");
  s += line;
  if (!o.candidates.empty()) {
    std::snprintf(line, sizeof line, "  %-44s %5s %12.1f %9s  %-22s %s\n",
                  o.candidates[o.winner].label.c_str(), "-", o.plan.provenance.measured_sps,
                  "1.00x", "", "chosen");
    s += line;
  }
  std::vector<RecipeAlternative> alts = o.alternatives;
  std::stable_sort(alts.begin(), alts.end(), [](const auto& a, const auto& b) {
    if (a.failed != b.failed) return !a.failed;
    if (a.skipped != b.skipped) return !a.skipped;
    if (a.round != b.round) return a.round > b.round;
    return a.ratio < b.ratio;
  });
  for (const RecipeAlternative& a : alts) {
    char interval[64] = "";
    if (a.hi > 0) {
      std::snprintf(interval, sizeof interval, "%.2f-%.2f (%d)", a.lo, a.hi, a.rounds);
    } else if (a.rounds > 0) {
      std::snprintf(interval, sizeof interval, "too few (%d)", a.rounds);
    }
    const std::string note = a.failed    ? ("failed: " + a.reason).substr(0, 120)
                             : a.skipped ? std::string("not measured (budget)")
                             : a.hi > 0 && a.lo <= 1.0 && a.hi >= 1.0
                                 ? std::string("not significantly slower")
                                 : std::string();
    std::snprintf(line, sizeof line, "  %-44s %5d %12.1f %9s  %-22s %s\n", a.label.c_str(), a.round,
                  a.samples_per_s, a.ratio > 0 ? fmt_ratio(a.ratio).c_str() : "-", interval,
                  note.c_str());
    s += line;
  }
  const TrainingPlan& t = o.plan.training;
  std::snprintf(line, sizeof line,
                "plan: per-rank batch %lld, global batch %lld, %s scaling, lr x%.3g (warmup %lld "
                "steps), bucket %s, overlap %s\n",
                static_cast<long long>(t.per_rank_batch), static_cast<long long>(t.global_batch),
                std::string(recipes::scaling_name(t.scaling)).c_str(), t.lr_scale,
                static_cast<long long>(t.warmup_steps),
                strings::format_bytes(t.bucket_bytes).c_str(), t.overlap ? "on" : "off");
  s += line;
  s += "why: " + o.plan.provenance.reason + "\n";
  return s;
}

}  // namespace dltune::tuner
