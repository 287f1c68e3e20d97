#include "launcher/launch_plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "common/log.h"
#include "common/paths.h"
#include "common/strings.h"
#include "launcher/event_follower.h"
#include "launcher/launch_dry_run.h"
#include "launcher/launch_progress.h"
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
// Kept back from the trials' deadline for the ranks' shut-down and storing the plan.
constexpr double kReserveS = 1.0;
constexpr double kReserveShare = 0.03;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Now, in seconds since the Unix epoch: the clock the ranks' deadlines are on.
double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string deadline_arg(double deadline) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f", deadline);
  return buf;
}

uint64_t prev_pow2(uint64_t v) {
  uint64_t p = 4;
  while (p * 2 <= v) p <<= 1;
  return p;
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

// Whether stored measurements reach the job's largest bucket (the summary scales a measured
// size down, or up by at most 4x, to a bucket's size).
bool covers(const std::vector<tdb::Measurement>& rows, const std::vector<uint64_t>& buckets) {
  uint64_t top = 0, need = 0;
  for (const auto& m : rows) {
    if (!m.failed && m.collective == "allreduce") top = std::max(top, m.bytes);
  }
  for (uint64_t b : buckets) need = std::max(need, b);
  return need == 0 || top * 4 >= need;
}

// The collective half: the cached collective plan of this shape (when its measurements cover
// the job's buckets), or a sweep now, ended by `deadline` (epoch seconds).
Result<recipes::Plan> collective_plan(const PlanRequest& r, PlanChoice& choice, double deadline) {
  const tdb::Key key = tuner::make_key(r.topo, db_shape(r.job), "", false);
  const std::vector<uint64_t> buckets = job_bucket_sizes(r.recipe);
  if (!r.retune) {
    auto hit = tdb::lookup_plan(r.layers, key);
    if (hit && hit->kind == tdb::HitKind::kExact) {
      auto plan = recipes::parse_plan(hit->plan.plan_json);
      auto rows = stored_measurements(hit->db_path, key);
      if (plan && covers(rows, buckets)) {
        tell(r, "collectives: using the cached collective plan from " + hit->db_path);
        choice.collective_measurements = std::move(rows);
        return plan;
      }
      if (plan) {
        tell(r, "collectives: the cached collective plan in " + hit->db_path +
                    " was measured below this job's buckets (up to " +
                    strings::format_bytes(
                        buckets.empty() ? 0 : *std::max_element(buckets.begin(), buckets.end())) +
                    "); measuring again");
      }
    }
  }
  if (r.job.nodes * r.job.ranks_per_node < 2) {
    return recipe_default_plan(r.recipe, r.job);  // one rank: nothing to reduce
  }
  auto prog = cli::sibling_program("dltune-tune-rank");
  if (!prog) return prog.error();
  const std::string out = r.work_dir + "/collectives.json";
  const std::string events = r.work_dir + "/sweep_progress.jsonl";
  const auto [min_bytes, max_bytes] = sweep_range(buckets);
  if (r.progress != nullptr) {
    r.progress->phase("tuning collectives");
    r.progress->status("starting " + std::to_string(r.job.nodes * r.job.ranks_per_node) +
                       " ranks to measure allreduce from " + strings::format_bytes(min_bytes) +
                       " to " + strings::format_bytes(max_bytes));
  }
  char budget[32];
  std::snprintf(budget, sizeof budget, "%.3f", std::max(0.1, deadline - epoch_now()));
  {
    EventFollower follow(events, [&](const nlohmann::json& e) {
      if (r.progress != nullptr) show_rank_event(*r.progress, e);
    });
    DLTUNE_TRY(r.run("collective tuning",
                     {*prog, "--min-bytes", std::to_string(min_bytes), "--max-bytes",
                      std::to_string(max_bytes), "--strategy", "model", "--budget", budget,
                      "--deadline", deadline_arg(deadline), "--progress", events, "--out", out}));
  }
  auto text = paths::read_file(out);
  if (!text) return std::move(text).error().wrap("reading the collective tuning outcome");
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return internal_error("the collective tuning outcome is not JSON");
  auto outcome = tuner::outcome_from_json(j);
  if (!outcome) return internal_error(outcome.error().message());
  if (outcome->sizes.empty()) {
    choice.budget_cut.push_back(
        "the collective sweep measured nothing (starting the ranks took "
        "its share of the budget): the recipe's allreduce settings");
    tell(r,
         "collectives: the budget left no time to measure them; using the recipe's settings "
         "(a larger tune.budget measures them)");
    return recipe_default_plan(r.recipe, r.job);
  }
  auto plan = tuner::plan_from_outcome(*outcome);
  if (!plan) return internal_error(plan.error().message());
  const tdb::Provenance prov = tdb::local_provenance();
  const auto rows = tuner::measurement_rows(*outcome, key, prov);
  DLTUNE_TRY_CTX(
      tdb::store_plan(r.layers.user_db, {key, recipes::serialize_plan(*plan), prov}, rows),
      "storing the collective plan in " + r.layers.user_db);
  if (outcome->budget_exhausted) {
    uint64_t reached = 0;
    for (const auto& sz : outcome->sizes) {
      if (!sz.extrapolated) reached = std::max(reached, sz.bytes);
    }
    choice.budget_cut.push_back("the collective sweep stopped at " +
                                strings::format_bytes(reached) + " of " +
                                strings::format_bytes(max_bytes));
  }
  choice.collective_outcome = std::move(j);
  choice.collective_measurements = rows;
  tell(r, "collectives: tuned in " + std::to_string(static_cast<int>(outcome->tuning_s + 0.5)) +
              " s: allreduce " + allreduce_in_words(*plan));
  return plan;
}

}  // namespace

std::vector<uint64_t> job_bucket_sizes(const recipes::Recipe& recipe) {
  const auto grad = static_cast<uint64_t>(std::max<int64_t>(tuner::gradient_bytes(recipe), 0));
  if (grad == 0) return {};
  if (recipe.comm.bucket_bytes > 0) return {std::min<uint64_t>(recipe.comm.bucket_bytes, grad)};
  std::vector<uint64_t> out;
  for (uint64_t b : {uint64_t{1} << 20, uint64_t{4} << 20, uint64_t{16} << 20}) {
    if (b < grad) out.push_back(b);
  }
  out.push_back(grad);
  return out;
}

std::pair<uint64_t, uint64_t> sweep_range(const std::vector<uint64_t>& buckets) {
  if (buckets.empty()) return {uint64_t{64} << 10, uint64_t{64} << 10};
  const uint64_t lo_b = *std::min_element(buckets.begin(), buckets.end());
  const uint64_t hi_b = *std::max_element(buckets.begin(), buckets.end());
  const uint64_t hi = std::min<uint64_t>(next_pow2(hi_b), uint64_t{256} << 20);
  const uint64_t lo = std::min(hi, std::max<uint64_t>(uint64_t{64} << 10, prev_pow2(lo_b) / 2));
  return {lo, hi};
}

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
                           (r.dry_run ? ": a real launch would narrow its search by it and tune "
                                        "for this exact machine and shape"
                                      : ": narrows the search; tuning for this exact machine "
                                        "and shape"));
  }
  const double budget = r.recipe.tune.budget_seconds;
  if (r.no_tune || budget <= 0) {
    choice.plan = recipe_default_plan(r.recipe, r.job);
    choice.source = "default";
    if (r.no_tune && !r.dry_run) {
      choice.notes.push_back("--no-tune: running the recipe's own settings");
    }
    return choice;
  }

  const auto t0 = std::chrono::steady_clock::now();
  const double start = epoch_now();
  const double reserve = std::min(kReserveS, kReserveShare * budget);
  DLTUNE_TRY(paths::make_dirs(r.work_dir));
  auto base = collective_plan(r, choice, start + budget * kCollectiveShare);
  if (!base) return std::move(base).error().wrap("tuning the collectives");
  base->job = r.job;

  tuner::RecipeTuneRequest req;
  req.recipe = r.recipe;
  req.recipe_path = r.recipe_path;
  req.job = r.job;
  req.base = *base;
  req.deadline = start + budget - reserve;
  req.budget_s = std::max(0.1, req.deadline - epoch_now());
  req.progress_path = r.work_dir + "/trial_progress.jsonl";
  req.hint = hint;
  req.hint_source = hint_source;
  if (r.progress != nullptr) {
    r.progress->phase("tuning batch, buckets, overlap");
    r.progress->status("starting " + std::to_string(r.job.nodes * r.job.ranks_per_node) +
                       " ranks for the trial trainings (" +
                       std::to_string(static_cast<int>(req.budget_s + 0.5)) +
                       " s of the budget left)");
  }
  auto worker = cli::sibling_program("dltune-worker");
  if (!worker) return worker.error();
  const tuner::RunRanks run_trials = [&](const std::vector<std::string>& args) -> Status {
    std::vector<std::string> argv = {*worker};
    argv.insert(argv.end(), args.begin(), args.end());
    EventFollower follow(req.progress_path, [&](const nlohmann::json& e) {
      if (r.progress != nullptr) show_rank_event(*r.progress, e);
    });
    return r.run("trial trainings", argv);
  };
  auto tuned = tuner::tune_recipe(req, run_trials, r.work_dir);
  if (!tuned) return std::move(tuned).error().wrap("tuning the recipe");
  choice.plan = tuned->plan;
  choice.plan.job = r.job;
  recipes::Provenance& pv = choice.plan.provenance;
  pv.source = recipes::PlanSource::kTuned;
  pv.recipe = r.recipe.name;
  if (!pv.budget_cut.empty()) choice.budget_cut.push_back(pv.budget_cut);
  pv.budget_cut = strings::join(choice.budget_cut, "; ");
  pv.budget_s = budget;
  pv.collective_regret = base->provenance.collective_regret;
  choice.budget_s = budget;
  choice.recipe_outcome = tuner::recipe_outcome_to_json(*tuned);
  choice.source = "tuned";
  choice.tuning_s = seconds_since(t0);
  pv.tuning_s = choice.tuning_s;
  choice.db_path = r.layers.user_db;
  const tdb::Provenance prov = tdb::local_provenance();
  DLTUNE_TRY_CTX(
      tdb::store_plan(r.layers.user_db, {key, recipes::serialize_plan(choice.plan), prov}, {},
                      tuner::recipe_trial_rows(*tuned, key, prov)),
      "storing the plan and its trials in " + r.layers.user_db);
  return choice;
}

}  // namespace dltune::launcher
