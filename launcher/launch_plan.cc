#include "launcher/launch_plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <span>

#include "common/log.h"
#include "common/paths.h"
#include "engine/train/recipe_config.h"
#include "launcher/rank_program.h"
#include "recipes/plan_fit.h"
#include "tuner/collective_plan.h"
#include "tuner/collective_tuning.h"
#include "tuner/db/store.h"
#include "tuner/key.h"
#include "tuner/recipe_tuning.h"

namespace dltune::launcher {
namespace {

namespace tdb = tuner::db;

// Share of the recipe's budget spent on the collective sweep; the rest goes to trials.
constexpr double kCollectiveShare = 0.3;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

tdb::JobShape db_shape(const recipes::JobShape& job) {
  return tdb::JobShape{job.nodes, job.ranks_per_node};
}

uint64_t next_pow2(uint64_t v) {
  uint64_t p = 4;
  while (p < v) p <<= 1;
  return p;
}

// The stored collective measurements of this machine and shape, for the report.
std::vector<tdb::Measurement> stored_measurements(const std::string& db_path, const tdb::Key& key) {
  if (db_path.empty() || !paths::exists(db_path)) return {};
  auto db = tdb::TuningDb::open(db_path, tdb::OpenMode::kReadOnly);
  if (!db) return {};
  tdb::Filter f;
  f.fingerprint = key.fingerprint;
  f.shape = key.shape;
  auto rows = db->measurements(f);
  return rows ? std::move(*rows) : std::vector<tdb::Measurement>{};
}

void tell(const PlanRequest& r, const std::string& line) {
  if (r.progress != nullptr) r.progress->message(line);
}

// Stores a plan; a database this user may not write costs the launch nothing but a note
// (the plan was measured and is used; it is just not remembered).
Status store_or_note(const std::string& db, const tdb::PlanRecord& plan,
                     std::span<const tdb::Measurement> ms, std::span<const tdb::RecipeTrial> trials,
                     PlanChoice& choice) {
  Status s = tdb::store_plan(db, plan, ms, trials);
  if (s.ok() || s.error().kind() != ErrorKind::kUnsupported) return s;
  choice.notes.push_back("the plan is used but not stored: " + s.error().message());
  return ok_status();
}

// The cached plan made fit for this launch: the recipe's fixed settings written over it
// (recipes/plan_fit.h), then checked against the job and the recipe as the ranks will run it.
// An error says why the plan cannot be used; the launch then tunes again or runs the recipe's
// own settings, never fails because of a stored plan.
Result<recipes::Plan> fit_cached_plan(const PlanRequest& r, const std::string& plan_json,
                                      std::vector<std::string>* notes) {
  auto plan = recipes::parse_plan(plan_json);
  if (!plan) return std::move(plan).error();
  DLTUNE_TRY(recipes::check_plan_plausible(*plan));
  if (!(plan->job == r.job)) {
    return invalid_input("it is for a " + std::to_string(plan->job.nodes) + "x" +
                         std::to_string(plan->job.ranks_per_node) + " job, not " +
                         std::to_string(r.job.nodes) + "x" + std::to_string(r.job.ranks_per_node));
  }
  const int64_t ranks = int64_t{r.job.nodes} * r.job.ranks_per_node;
  for (std::string& n : recipes::apply_fixed_settings(r.recipe, ranks, &*plan)) {
    notes->push_back("cached plan adjusted: " + n);
  }
  DLTUNE_TRY(recipes::validate_plan(*plan));
  const recipes::TrainingConfig& t = r.recipe.training;
  const int64_t samples = tuner::recipe_train_samples(r.recipe);
  if (samples > 0 && plan->training.global_batch > samples) {
    return invalid_input("its global batch " + std::to_string(plan->training.global_batch) +
                         " exceeds the recipe's " + std::to_string(samples) + " training samples");
  }
  if (t.max_global_batch > 0 && plan->training.global_batch > t.max_global_batch) {
    return invalid_input("its global batch " + std::to_string(plan->training.global_batch) +
                         " exceeds training.batch.max_global " +
                         std::to_string(t.max_global_batch));
  }
  auto cfg = engine::train_config_from(r.recipe, *plan, static_cast<int>(ranks));
  if (!cfg) return std::move(cfg).error();
  if (plan->training.warmup_steps > cfg->steps) {
    return invalid_input("its warm-up of " + std::to_string(plan->training.warmup_steps) +
                         " steps is longer than the run's " + std::to_string(cfg->steps));
  }
  return plan;
}

// The collective half: the cached collective plan of this shape, or a sweep now.
Result<recipes::Plan> collective_plan(const PlanRequest& r, PlanChoice& choice, double budget_s) {
  const tdb::Key key = tuner::make_key(r.topo, db_shape(r.job), "", false);
  if (!r.retune) {
    auto hit = tdb::lookup_plan(r.layers, key);
    if (hit && hit->kind == tdb::HitKind::kExact) {
      auto plan = recipes::parse_plan(hit->plan.plan_json);
      if (plan && recipes::check_plan_plausible(*plan).ok()) {
        tell(r, "collectives: using the cached collective plan from " + hit->db_path);
        choice.collective_measurements = stored_measurements(hit->db_path, key);
        return plan;
      }
    }
  }
  if (r.job.nodes * r.job.ranks_per_node < 2) {
    return recipe_default_plan(r.recipe, r.job);  // one rank: nothing to reduce
  }
  auto prog = cli::sibling_program("dltune-tune-rank");
  if (!prog) return prog.error();
  const std::string out = r.work_dir + "/collectives.json";
  char budget[32];
  std::snprintf(budget, sizeof budget, "%.3f", budget_s);
  const uint64_t max_bytes = std::min<uint64_t>(
      next_pow2(static_cast<uint64_t>(std::max<int64_t>(tuner::gradient_bytes(r.recipe), 4))),
      uint64_t{256} << 20);
  if (r.progress != nullptr) r.progress->phase("tuning collectives");
  // From 64 KiB up to the gradient: the sizes a step's bucket allreduces have. Smaller sizes
  // (the loss scalar) take the choice at 64 KiB; a short budget is better spent where the
  // time is than on latency-bound sizes.
  const uint64_t min_bytes = std::min<uint64_t>(uint64_t{64} << 10, max_bytes);
  DLTUNE_TRY(r.run("collective tuning", {*prog, "--min-bytes", std::to_string(min_bytes),
                                         "--max-bytes", std::to_string(max_bytes), "--strategy",
                                         "model", "--budget", budget, "--out", out}));
  auto text = paths::read_file(out);
  if (!text) return std::move(text).error().wrap("reading the collective tuning outcome");
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return internal_error("the collective tuning outcome is not JSON");
  auto outcome = tuner::outcome_from_json(j);
  if (!outcome) return internal_error(outcome.error().message());
  auto plan = tuner::plan_from_outcome(*outcome);
  if (!plan) return internal_error(plan.error().message());
  const tdb::Provenance prov = tdb::local_provenance();
  const auto rows = tuner::measurement_rows(*outcome, key, prov);
  DLTUNE_TRY_CTX(store_or_note(r.layers.user_db, {key, recipes::serialize_plan(*plan), prov}, rows,
                               {}, choice),
                 "storing the collective plan in " + r.layers.user_db);
  choice.collective_outcome = std::move(j);
  choice.collective_measurements = rows;
  tell(r, "collectives: tuned in " + std::to_string(static_cast<int>(outcome->tuning_s + 0.5)) +
              " s:\n" + tuner::format_plan_ranges(*plan));
  return plan;
}

}  // namespace

recipes::Plan recipe_default_plan(const recipes::Recipe& recipe, const recipes::JobShape& job) {
  const auto& t = recipe.training;
  const int64_t ranks = std::max<int64_t>(1, int64_t{job.nodes} * job.ranks_per_node);
  int64_t per_rank = t.per_rank_batch;
  if (per_rank <= 0 && t.global_batch > 0) per_rank = std::max<int64_t>(1, t.global_batch / ranks);
  if (per_rank <= 0) per_rank = 32;
  const recipes::Algorithm algo = recipe.comm.allreduce.value_or(recipes::Algorithm::kRing);
  recipes::Plan plan = recipes::default_plan(job.nodes, job.ranks_per_node, per_rank, algo);
  auto& tp = plan.training;
  if (t.scaling == recipes::Scaling::kStrong && t.global_batch > 0) {
    tp.scaling = recipes::Scaling::kStrong;
    tp.global_batch = t.global_batch;
    tp.per_rank_batch = std::max<int64_t>(1, t.global_batch / ranks);
  } else {
    tp.scaling = recipes::Scaling::kWeak;
    tp.per_rank_batch = per_rank;
    tp.global_batch = per_rank * ranks;
  }
  const int64_t ref = t.optimizer.lr_reference_batch;
  tp.lr_scale = recipes::lr_scale_for(t.optimizer.lr_scaling, tp.global_batch, ref);
  tp.warmup_steps = t.schedule.warmup_steps;
  if (recipe.comm.bucket_bytes > 0) tp.bucket_bytes = recipe.comm.bucket_bytes;
  tp.overlap = recipe.comm.overlap != recipes::Overlap::kOff;
  plan.provenance.source = recipes::PlanSource::kDefault;
  plan.provenance.reason = "the recipe's own settings (not tuned)";
  return plan;
}

Result<PlanChoice> choose_plan(const PlanRequest& r) {
  PlanChoice choice;
  const std::string sig = recipes::recipe_signature(r.recipe);
  const tdb::Key key = tuner::make_key(r.topo, db_shape(r.job), sig, false);
  auto hit = tdb::lookup_plan(r.layers, key);
  if (!hit) return std::move(hit).error().wrap("looking the plan up");
  for (const std::string& w : hit->warnings) choice.notes.push_back(w);
  if (hit->kind == tdb::HitKind::kExact && !r.retune) {
    std::vector<std::string> adjusted;
    auto plan = fit_cached_plan(r, hit->plan.plan_json, &adjusted);
    if (plan) {
      choice.plan = std::move(*plan);
      choice.plan.provenance.source = recipes::PlanSource::kCache;
      choice.source = "cache";
      choice.db_path = hit->db_path;
      choice.from_site = hit->from_site;
      choice.site = hit->site;
      choice.notes.insert(choice.notes.end(), adjusted.begin(), adjusted.end());
      choice.collective_measurements =
          stored_measurements(hit->db_path, tuner::make_key(r.topo, db_shape(r.job), "", false));
      return choice;
    }
    const bool tunes = !r.no_tune && r.recipe.tune.budget_seconds > 0;
    choice.notes.push_back("warning: the cached plan in " + hit->db_path + " is not used (" +
                           plan.error().message() + "); " +
                           (tunes ? "tuning again" : "running the recipe's own settings"));
  }
  std::optional<recipes::TrainingPlan> hint;
  std::string hint_source;
  if (hit->kind == tdb::HitKind::kNear) {
    std::string diff;
    for (const auto& d : hit->differences) diff += (diff.empty() ? "" : "; ") + d;
    hint_source = hit->db_path + ": " + diff;
    if (auto near = recipes::parse_plan(hit->plan.plan_json)) hint = near->training;
    choice.notes.push_back("near hit in " + hint_source +
                           ": narrows the search; tuning for this exact machine and shape");
  }
  const double budget = r.recipe.tune.budget_seconds;
  if (r.no_tune || budget <= 0) {
    choice.plan = recipe_default_plan(r.recipe, r.job);
    choice.source = "default";
    if (r.no_tune) choice.notes.push_back("--no-tune: running the recipe's own settings");
    return choice;
  }

  const auto t0 = std::chrono::steady_clock::now();
  DLTUNE_TRY(paths::make_dirs(r.work_dir));
  auto base = collective_plan(r, choice, budget * kCollectiveShare);
  if (!base) return std::move(base).error().wrap("tuning the collectives");
  base->set_job(r.job);

  tuner::RecipeTuneRequest req;
  req.recipe = r.recipe;
  req.recipe_path = r.recipe_path;
  req.job = r.job;
  req.base = *base;
  req.budget_s = std::max(1.0, budget - seconds_since(t0));
  req.hint = hint;
  req.hint_source = hint_source;
  if (r.progress != nullptr) r.progress->phase("tuning batch, buckets, overlap");
  auto worker = cli::sibling_program("dltune-worker");
  if (!worker) return worker.error();
  const tuner::RunRanks run_trials = [&](const std::vector<std::string>& args) -> Status {
    std::vector<std::string> argv = {*worker};
    argv.insert(argv.end(), args.begin(), args.end());
    return r.run("trial trainings", argv);
  };
  auto tuned = tuner::tune_recipe(req, run_trials, r.work_dir);
  if (!tuned) return std::move(tuned).error().wrap("tuning the recipe");
  choice.plan = tuned->plan;
  choice.plan.set_job(r.job);
  choice.plan.provenance.source = recipes::PlanSource::kTuned;
  choice.recipe_outcome = tuner::recipe_outcome_to_json(*tuned);
  choice.source = "tuned";
  choice.tuning_s = seconds_since(t0);
  choice.db_path = r.layers.user_db;
  const tdb::Provenance prov = tdb::local_provenance();
  DLTUNE_TRY_CTX(store_or_note(r.layers.user_db, {key, recipes::serialize_plan(choice.plan), prov},
                               {}, tuner::recipe_trial_rows(*tuned, key, prov), choice),
                 "storing the plan and its trials in " + r.layers.user_db);
  return choice;
}

}  // namespace dltune::launcher
