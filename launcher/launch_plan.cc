#include "launcher/launch_plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "common/log.h"
#include "common/paths.h"
#include "launcher/rank_program.h"
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

// The collective half: the cached collective plan of this shape, or a sweep now.
Result<recipes::Plan> collective_plan(const PlanRequest& r, PlanChoice& choice, double budget_s) {
  const tdb::Key key = tuner::make_key(r.topo, db_shape(r.job), "", false);
  if (!r.retune) {
    auto hit = tdb::lookup_plan(r.layers, key);
    if (hit && hit->kind == tdb::HitKind::kExact) {
      auto plan = recipes::parse_plan(hit->plan.plan_json);
      if (plan) {
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
  DLTUNE_TRY_CTX(
      tdb::store_plan(r.layers.user_db, {key, recipes::serialize_plan(*plan), prov}, rows),
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
    auto plan = recipes::parse_plan(hit->plan.plan_json);
    if (plan) {
      choice.plan = std::move(*plan);
      choice.plan.provenance.source = recipes::PlanSource::kCache;
      choice.source = "cache";
      choice.db_path = hit->db_path;
      choice.from_site = hit->from_site;
      choice.site = hit->site;
      choice.collective_measurements =
          stored_measurements(hit->db_path, tuner::make_key(r.topo, db_shape(r.job), "", false));
      return choice;
    }
    choice.notes.push_back("the cached plan in " + hit->db_path + " does not parse (" +
                           plan.error().message() + "); tuning again");
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
  DLTUNE_TRY_CTX(
      tdb::store_plan(r.layers.user_db, {key, recipes::serialize_plan(choice.plan), prov}, {},
                      tuner::recipe_trial_rows(*tuned, key, prov)),
      "storing the plan and its trials in " + r.layers.user_db);
  return choice;
}

}  // namespace dltune::launcher
