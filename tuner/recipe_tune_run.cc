// tune_recipe(): the trial searches of one recipe tuning (tuner/recipe_tuning.h), with the
// learning-rate fallbacks when every candidate diverges and the guard for a scaled-up lr the
// trials never ran past its warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <utility>

#include "common/log.h"
#include "common/paths.h"
#include "common/strings.h"
#include "recipes/datasets.h"
#include "tuner/recipe_tuning.h"

namespace dltune::tuner {
namespace {

using json = nlohmann::json;
using recipes::TrainingPlan;

// One launch of the trial search: its trials file, parsed records (empty when malformed:
// outcome_from_trials() reports that), the schedule it ran, and its wall time.
struct TrialSearch {
  json file;
  std::vector<TrialRecord> trials;
  TrialSchedule schedule;
  double wall_s = 0;
};

// Runs the trial search over `cands` in `work_dir` with `budget_s`: writes the candidates
// file, runs the ranks, reads the trials file.
Result<TrialSearch> run_trial_search(const RecipeTuneRequest& req, const RunRanks& run_ranks,
                                     const std::vector<RecipeCandidate>& cands,
                                     const std::string& work_dir, double budget_s) {
  TrialSearch s;
  RecipeTuneRequest r = req;
  r.budget_s = budget_s;
  s.schedule =
      schedule_for(r, cands.size(), trial_trainers(cands, req.grid), gradient_bytes(req.recipe));
  recipes::Plan base = req.base;
  base.set_job(req.job);
  json c = {{"version", 1},
            {"recipe", req.recipe_path},
            {"base", recipes::plan_to_json(base)},
            {"schedule", halving::schedule_to_json(s.schedule)}};
  json list = json::array();
  for (const RecipeCandidate& k : cands) list.push_back(candidate_json(k, base));
  c["candidates"] = list;
  DLTUNE_TRY_CTX(paths::make_dirs(work_dir), "creating " + work_dir);
  const std::string cpath = work_dir + "/candidates.json";
  const std::string rpath = work_dir + "/trials.json";
  DLTUNE_TRY_CTX(paths::write_file_atomic(cpath, c.dump(1)), "writing " + cpath);
  char budget[32];
  std::snprintf(budget, sizeof budget, "%.3f", budget_s);
  std::vector<std::string> args = {"trial", "--recipe", req.recipe_path, "--candidates", cpath,
                                   "--out", rpath,      "--budget",      budget};
  if (req.deadline > 0) {
    char deadline[48];
    std::snprintf(deadline, sizeof deadline, "%.3f", req.deadline);
    args.insert(args.end(), {"--deadline", deadline});
  }
  if (!req.progress_path.empty()) args.insert(args.end(), {"--progress", req.progress_path});
  if (req.grid) args.push_back("--grid");
  const auto t0 = std::chrono::steady_clock::now();
  DLTUNE_TRY_CTX(run_ranks(args), "running the trial trainings");
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto text = paths::read_file(rpath);
  if (!text) return std::move(text).error().wrap("reading the trial results");
  s.file = json::parse(*text, nullptr, false);
  if (s.file.is_discarded()) {
    return internal_error("the trial results in " + rpath + " are not JSON");
  }
  if (auto ts = trials_from_json(s.file.contains("trials") ? s.file["trials"] : json())) {
    s.trials = std::move(*ts);
  }
  return s;
}

// Whether every candidate that ran failed by diverging (and at least one ran).
bool every_candidate_diverged(const std::vector<TrialRecord>& trials) {
  std::set<size_t> ran, diverged;
  for (const TrialRecord& t : trials) {
    ran.insert(t.candidate);
    if (t.failed && t.reason.rfind("diverged", 0) == 0) diverged.insert(t.candidate);
  }
  return !ran.empty() && ran == diverged;
}

// A fallback search (another lr rule) runs only with this much of the budget left (in deadline
// mode; the old budget-only mode gives it a quarter of the budget).
constexpr double kFallbackMinS = 3;
constexpr double kFallbackMinShare = 0.15;

// Trainer steps after the end of its lr warm-up that a family must have run in the trials for
// its scaled-up lr to count as seen to train (LeNet at lr x2 diverged 1-2 steps after its
// 20-step warm-up ended).
constexpr int64_t kStepsPastWarmup = 10;

// When the recipe leaves the lr rule to dltune (auto) and the winner's lr was scaled up, but
// its trainer ran fewer than warm-up + kStepsPastWarmup steps in search `s` (a small budget),
// the scaled lr was never seen at its peak: the plan keeps the recipe's lr unscaled (the same
// step time) and its reason says so.
void keep_unseen_lr_unscaled(const RecipeTuneRequest& req,
                             const std::vector<RecipeCandidate>& cands, const TrialSearch& s,
                             RecipeTuneOutcome* o) {
  TrainingPlan& t = o->plan.training;
  if (req.recipe.training.optimizer.lr_scaling != recipes::LrScaling::kAuto || !(t.lr_scale > 1.0))
    return;
  // The steps of the trainer the winner ran on: its own in the grid, its family's in halving
  // (all their trials when the trainers stay resident, else the longest, rebuilt each round),
  // after the search's warm-up steps.
  const TrainingPlan& won = cands[o->winner].training;  // the warm-up it must run past
  int64_t all = 0, longest = 0;
  for (const TrialRecord& r : s.trials) {
    if (r.candidate >= cands.size()) continue;
    const bool same =
        o->grid ? r.candidate == o->winner : trains_alike(cands[r.candidate], cands[o->winner]);
    if (!same) continue;
    all += r.steps;
    longest = std::max<int64_t>(longest, r.steps);
  }
  const int64_t steps =
      s.schedule.halving.warmup_steps + (s.schedule.halving.keep_built ? all : longest);
  if (steps >= t.warmup_steps + kStepsPastWarmup) return;
  const double scaled = t.lr_scale;
  apply_lr_rule(req.recipe, req.job.nodes * req.job.ranks_per_node, &t, recipes::LrScaling::kNone);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "; lr kept unscaled (x%.3g): the budget let its training run %lld steps, too few "
                "to see lr x%.3g past its %lld-step warm-up (a larger tune.budget can test it)",
                t.lr_scale, static_cast<long long>(steps), scaled,
                static_cast<long long>(won.warmup_steps));
  o->plan.provenance.reason += buf;
}

}  // namespace

Result<RecipeTuneOutcome> tune_recipe(const RecipeTuneRequest& req, const RunRanks& run_ranks,
                                      const std::string& work_dir) {
  if (!(req.budget_s > 0)) return invalid_input("recipe tuning needs a positive budget");
  if (req.recipe_path.empty()) return invalid_input("recipe tuning needs the recipe's path");
  auto cands = generate_candidates(req.recipe, req.job);
  if (!cands) return cands.error();
  if (!req.data_parallel_fits) cands->clear();
  std::vector<RecipeCandidate> pipelines = layout_candidates(req.recipe, req.job, req.layouts);
  const size_t generated = cands->size() + pipelines.size();
  if (req.hint && !cands->empty()) *cands = narrow_candidates(*cands, *req.hint);
  if (req.hint_layout && req.hint_layout->pipelined()) {
    std::vector<RecipeCandidate> same;
    for (const RecipeCandidate& k : pipelines)
      if (k.layout->stages == req.hint_layout->stages) same.push_back(k);
    if (!same.empty()) pipelines = std::move(same);
  }
  cands->insert(cands->end(), pipelines.begin(), pipelines.end());
  if (cands->empty())
    return invalid_input(
        "no candidate to measure: data parallelism does not fit and no pipeline "
        "layout was given");
  const size_t searched = cands->size();
  auto s = run_trial_search(req, run_ranks, *cands, work_dir, req.budget_s);
  if (!s) return s.error();
  double wall = s->wall_s;
  std::vector<RecipeCandidate> used = *cands;  // the candidates of the search `out` is from
  auto out = outcome_from_trials(req, used, s->file);
  // Every candidate diverged: its scaled-up lr is too high for the model. Try the rules that
  // grow lr less with the global batch, in the budget left. `rules`: those tried, in order;
  // `errors`: each failed search's error.
  std::vector<std::string> rules = {"linear"}, errors;
  constexpr std::pair<recipes::LrScaling, const char*> kFallbacks[] = {
      {recipes::LrScaling::kSqrt, "square-root"}, {recipes::LrScaling::kNone, "unscaled"}};
  for (const auto& [rule, name] : kFallbacks) {
    if (out || !every_candidate_diverged(s->trials)) break;
    std::vector<RecipeCandidate> next = fallback_lr_candidates(*cands, req.recipe, req.job, rule);
    if (next.empty()) break;
    errors.push_back("with " + rules.back() + " lr, " + out.error().message());
    DLTUNE_LOG(kInfo, "tuner") << "every candidate diverged with " << rules.back() << " lr; trying "
                               << next.size() << " with " << name << " lr";
    const double left = req.budget_s - wall;
    if (req.deadline > 0 && left < std::max(kFallbackMinS, kFallbackMinShare * req.budget_s)) {
      // No time left to measure another rule within the budget: the unscaled lr, which
      // cannot diverge more than the recipe's own, unmeasured, and the reason says so.
      std::vector<RecipeCandidate> none =
          fallback_lr_candidates(*cands, req.recipe, req.job, recipes::LrScaling::kNone);
      if (none.empty()) break;
      used = std::move(none);
      out = outcome_from_trials(req, used, json{{"trials", json::array()}});
      if (out) {
        out->plan.provenance.reason =
            "every candidate diverged with " + strings::join(rules, " and ") +
            " lr scaling, and the budget left no time to measure another rule: the plan is " +
            used.front().label +
            " with the recipe's lr unscaled, not measured (a larger "
            "tune.budget measures it)";
        out->plan.provenance.budget_cut = "the lr fallback was not measured";
      }
      s->trials.clear();
      rules.push_back("unscaled (not measured)");
      break;
    }
    const std::string dir = work_dir + "/" + std::string(recipes::lr_scaling_name(rule)) + "-lr";
    s = run_trial_search(req, run_ranks, next, dir,
                         req.deadline > 0 ? left : std::max(left, req.budget_s / 4));
    if (!s) return s.error();
    wall += s->wall_s;
    used = std::move(next);
    out = outcome_from_trials(req, used, s->file);
    if (out) {
      out->plan.provenance.reason += "; every candidate diverged with " +
                                     strings::join(rules, " and ") + " lr scaling, so " + name +
                                     " lr was tried (optimizer.lr_scaling: auto)";
    }
    rules.push_back(name);
  }
  if (!out) {
    if (errors.empty()) return out.error();
    errors.push_back("with " + rules.back() + " lr, " + out.error().message());
    return peer_failed(strings::join(errors, "; "));
  }
  out->tuning_s = wall;
  out->plan.provenance.budget_s = req.budget_s;
  out->plan.provenance.tuning_s = wall;
  out->plan.provenance.run_steps =
      recipes::training_steps(req.recipe, out->plan.training.global_batch).value_or(0);
  out->plan.provenance.tuned_lr = req.recipe.training.optimizer.lr;
  keep_unseen_lr_unscaled(req, used, *s, &*out);
  if ((req.hint || req.hint_layout) && searched < generated) {
    out->plan.provenance.reason += "; searched " + std::to_string(searched) + " of " +
                                   std::to_string(generated) +
                                   " candidates, narrowed by a near hit" +
                                   (req.hint_source.empty() ? "" : " (" + req.hint_source + ")");
  }
  return out;
}

}  // namespace dltune::tuner
