#include "launcher/flow/launch_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <span>

#include "common/log.h"
#include "common/paths.h"
#include "common/strings.h"
#include "launcher/backend/rank_program.h"
#include "launcher/flow/cost_fits.h"
#include "launcher/flow/event_follower.h"
#include "launcher/flow/launch_progress.h"
#include "launcher/flow/plan_kernels.h"
#include "launcher/flow/plan_words.h"
#include "recipes/datasets.h"
#include "recipes/plan_fit.h"
#include "tuner/collective_plan.h"
#include "tuner/collective_tuning.h"
#include "tuner/db/key.h"
#include "tuner/db/store.h"
#include "tuner/recipe_tuning.h"

namespace dltune::launcher {
namespace {

namespace tdb = tuner::db;

// Share of the recipe's budget spent on the collective sweep; the rest goes to trials.
constexpr double kCollectiveShare = 0.3;
// Kept back from the trials' deadline for the ranks' shut-down and storing the plan.
constexpr double kReserveS = 1.0;
constexpr double kReserveShare = 0.03;
// The trials stop this share of the budget early (1-30 s) for choosing each layer's kernel
// after them (plan_kernels.h), which takes what the budget has left.
constexpr double kKernelShare = 0.1;

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

// Whether the tuning behind the stored plan `hit` scaled the learning rate in a trial (its
// choice then depended on the rate: a scaled rate's divergence decided between lr rules): its
// trials in the database that holds it, else (a plan stored without them) the candidates a tuning
// of this recipe and job would generate.
bool trials_scaled_lr(const PlanRequest& r, const tdb::LookupResult& hit) {
  auto scaled = [](double s) { return std::abs(s - 1.0) > 1e-12; };
  if (auto db = tdb::TuningDb::open(hit.db_path, tdb::OpenMode::kReadOnly)) {
    tdb::Filter f;
    f.fingerprint = hit.plan.key.fingerprint;
    f.recipe = hit.plan.key.recipe;
    f.dltune_version = hit.plan.key.versions.dltune;
    f.shape = hit.plan.key.shape;
    if (auto trials = db->recipe_trials(f); trials && !trials->empty()) {
      return std::any_of(trials->begin(), trials->end(),
                         [&](const tdb::RecipeTrial& t) { return scaled(t.lr_scale); });
    }
  }
  auto candidates = tuner::generate_candidates(r.recipe, r.job);
  if (!candidates) return true;  // cannot tell: as if it did
  return std::any_of(candidates->begin(), candidates->end(),
                     [&](const auto& c) { return scaled(c.training.lr_scale); });
}

// The cached plan made fit for this launch: the recipe's fixed settings written over it
// (recipes/plan_fit.h), then checked against the job and the recipe as the ranks will run it. A
// plan tuned with another learning rate is used only when `lr_scaled` is false (no trial scaled
// the rate: trials_scaled_lr()), and a note says so. An error says why the plan cannot be used;
// the launch then tunes again or runs the recipe's own settings, never fails because of a stored
// plan.
Result<recipes::Plan> fit_cached_plan(const PlanRequest& r, const std::string& plan_json,
                                      bool lr_scaled, std::vector<std::string>* notes) {
  auto plan = recipes::parse_plan(plan_json);
  if (!plan) return std::move(plan).error();
  DLTUNE_TRY(recipes::check_plan_plausible(*plan));
  const double lr = r.recipe.training.optimizer.lr, tuned_lr = plan->provenance.tuned_lr;
  if (tuned_lr > 0 && tuned_lr != lr) {
    char tuned[48], now[48];
    std::snprintf(tuned, sizeof tuned, "lr %g", tuned_lr);
    std::snprintf(now, sizeof now, "lr %g", lr);
    if (lr_scaled) {
      return invalid_input("it was tuned with " + std::string(tuned) + ", this run has " + now +
                           ", and its trials scaled the lr: whether a scaled lr diverges depends "
                           "on the rate");
    }
    notes->push_back("cached plan tuned with " + std::string(tuned) + ", used with this run's " +
                     now +
                     ": none of its trials scaled the lr, so the choice does not depend on "
                     "the rate");
  }
  if (plan->job.nodes != r.job.nodes || plan->job.ranks_per_node != r.job.ranks_per_node) {
    return invalid_input("it is for a " + std::to_string(plan->job.nodes) + "x" +
                         std::to_string(plan->job.ranks_per_node) + " job, not " +
                         std::to_string(r.job.nodes) + "x" + std::to_string(r.job.ranks_per_node));
  }
  // Threads per rank are the job's, like its placement: a plan tuned on other threads keeps
  // its choices, and says so.
  if (plan->job.threads_per_rank != r.job.threads_per_rank) {
    notes->push_back("cached plan adjusted: job.threads_per_rank: this job runs " +
                     std::to_string(r.job.threads_per_rank) + ", the plan was tuned with " +
                     std::to_string(plan->job.threads_per_rank));
    plan->job.threads_per_rank = r.job.threads_per_rank;
  }
  const int64_t ranks = int64_t{r.job.nodes} * r.job.ranks_per_node;
  for (std::string& n : recipes::apply_fixed_settings(r.recipe, ranks, &*plan)) {
    notes->push_back("cached plan adjusted: " + n);
  }
  // The run's steps at the plan's batch, counted once (for image folders a walk of the tree).
  recipes::TrainingPlan& tp = plan->training;
  const Result<int64_t> steps = recipes::training_steps(r.recipe, tp.global_batch);
  const int64_t run_steps = steps.value_or(0);
  // The run's length is not in the key: the warm-up a scaled lr gets is this run's 5 %.
  const int64_t warmup = recipes::scaled_lr_warmup(r.recipe, run_steps, tp.lr_scale);
  if (tp.warmup_steps != warmup) {
    notes->push_back("cached plan adjusted: training.warmup_steps: " + std::to_string(warmup) +
                     " for this run's " + std::to_string(run_steps) + " steps, the plan had " +
                     std::to_string(tp.warmup_steps));
    tp.warmup_steps = warmup;
  }
  if (plan->provenance.run_steps > 0 && run_steps > 0 && plan->provenance.run_steps != run_steps) {
    notes->push_back("cached plan tuned for a run of " +
                     std::to_string(plan->provenance.run_steps) + " steps, used for this run of " +
                     std::to_string(run_steps) +
                     ": the run's length does not change what the tuner measures");
  }
  DLTUNE_TRY(recipes::validate_plan(*plan));
  // Re-checked against this recipe at every serve, not only at import: an lr scale its rule
  // would not give at this batch (a bundle's lr x1000) never reaches the ranks.
  DLTUNE_TRY(recipes::check_plan_lr_scale(r.recipe, ranks, *plan));
  const recipes::TrainingConfig& t = r.recipe.training;
  const int64_t samples = recipes::train_samples(r.recipe).value_or(0);
  if (samples > 0 && plan->training.global_batch > samples) {
    return invalid_input("its global batch " + std::to_string(plan->training.global_batch) +
                         " exceeds the recipe's " + std::to_string(samples) + " training samples");
  }
  if (t.max_global_batch > 0 && plan->training.global_batch > t.max_global_batch) {
    return invalid_input("its global batch " + std::to_string(plan->training.global_batch) +
                         " exceeds training.batch.max_global " +
                         std::to_string(t.max_global_batch));
  }
  // The layout is laid over the ranks after this (launch_layout.h): checked as data parallel.
  recipes::Plan as_laid = *plan;
  if (!as_laid.parallel.pipelined()) as_laid.set_job(r.job);
  DLTUNE_TRY(recipes::check_plan_for_recipe(r.recipe, as_laid, ranks));
  if (!steps) return steps.error();
  if (plan->training.warmup_steps > *steps) {
    return invalid_input("its warm-up of " + std::to_string(plan->training.warmup_steps) +
                         " steps is longer than the run's " + std::to_string(*steps));
  }
  return plan;
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
  const tdb::Key key = tuner::db::make_key(r.topo, db_shape(r.job), "", false);
  const std::vector<uint64_t> buckets = job_bucket_sizes(r.recipe);
  if (!r.retune) {
    auto hit = tdb::lookup_plan(r.layers, key);
    if (hit && hit->kind == tdb::HitKind::kExact) {
      auto plan = recipes::parse_plan(hit->plan.plan_json);
      auto rows = stored_measurements(hit->db_path, key);
      if (plan && recipes::check_plan_plausible(*plan).ok() && covers(rows, buckets)) {
        tell(r, "collectives: using the cached collective plan from " + hit->db_path);
        choice.collective_measurements = std::move(rows);
        choice.level_fits = stored_level_fits(hit->db_path, key.fingerprint);
        return plan;
      }
      if (plan && !covers(rows, buckets)) {
        tell(r, "collectives: the cached collective plan in " + hit->db_path +
                    " was measured below this job's buckets (up to " +
                    strings::format_bytes(
                        buckets.empty() ? 0 : *std::max_element(buckets.begin(), buckets.end())) +
                    "); measuring again");
      }
    }
  }
  if (r.job.nodes * r.job.ranks_per_node < 2) {
    return recipes::recipe_default_plan(r.recipe, r.job);  // one rank: nothing to reduce
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
    return recipes::recipe_default_plan(r.recipe, r.job);
  }
  auto plan = tuner::plan_from_outcome(*outcome);
  if (!plan) return internal_error(plan.error().message());
  const tdb::Provenance prov = tdb::local_provenance();
  const auto rows = tuner::measurement_rows(*outcome, key, prov);
  DLTUNE_TRY_CTX(store_or_note(r.layers.user_db, {key, recipes::serialize_plan(*plan), prov}, rows,
                               {}, choice),
                 "storing the collective plan in " + r.layers.user_db);
  choice.level_fits = store_level_fits(r.layers.user_db, key);
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

namespace {

// The notes made printable: they quote database paths, sites and error messages.
PlanChoice printable_notes(PlanChoice choice) {
  for (std::string& n : choice.notes) n = strings::printable(n, "");
  return choice;
}

// Served as "cache": who vouched for the row, and a warning when nobody did.
void note_trust(const tdb::LookupResult& hit, PlanChoice& choice) {
  choice.signed_by = hit.plan.provenance.signed_by;
  if (choice.signed_by != tdb::kUnsigned) return;
  choice.notes.push_back(
      "warning: the plan cached in " + hit.db_path +
      " was imported unsigned (no trusted key vouches for it" +
      (hit.site.empty() ? std::string() : "; it says it comes from site '" + hit.site + "'") +
      "); it is used because it passed the checks against this recipe; --retune measures a "
      "plan here instead");
}

Result<PlanChoice> choose_plan_here(const PlanRequest& r);

}  // namespace

Result<PlanChoice> choose_plan(const PlanRequest& r) {
  auto choice = choose_plan_here(r);
  if (!choice) return choice;
  return printable_notes(std::move(*choice));
}

namespace {

// An exact hit's plan, fitted to this launch: into `choice` (served as "cache", with the
// database's collective measurements and level fits), true. False where it does not fit, with
// a warning note saying what happens instead.
bool use_cached(const PlanRequest& r, const tdb::LookupResult& hit, PlanChoice& choice) {
  std::vector<std::string> adjusted;
  auto plan = fit_cached_plan(r, hit.plan.plan_json, trials_scaled_lr(r, hit), &adjusted);
  if (!plan) {
    const bool tunes = !r.no_tune && r.recipe.tune.budget_seconds > 0;
    choice.notes.push_back("warning: the cached plan in " + hit.db_path + " is not used (" +
                           plan.error().message() + "); " +
                           (tunes ? "tuning again" : "running the recipe's own settings"));
    return false;
  }
  choice.plan = std::move(*plan);
  choice.plan.provenance.source = recipes::PlanSource::kCache;
  choice.source = "cache";
  choice.db_path = hit.db_path;
  choice.from_site = hit.from_site;
  choice.site = hit.site;
  choice.notes.insert(choice.notes.end(), adjusted.begin(), adjusted.end());
  note_trust(hit, choice);
  const tdb::Key ckey = tuner::db::make_key(r.topo, db_shape(r.job), "", false);
  choice.collective_measurements = stored_measurements(hit.db_path, ckey);
  choice.level_fits = stored_level_fits(hit.db_path, ckey.fingerprint);
  return true;
}

// For a plan not tuned now (the recipe's own settings): the models of this machine's stored
// sweeps, so that its prediction and summary estimate the allreduce as a cached plan's do: the
// measurements of this shape's collective plan and the level fits of the database holding it,
// else the user database's fits.
void stored_models(const PlanRequest& r, PlanChoice& choice) {
  const tdb::Key ckey = tuner::db::make_key(r.topo, db_shape(r.job), "", false);
  std::string db = r.layers.user_db;
  if (auto hit = tdb::lookup_plan(r.layers, ckey); hit && hit->kind == tdb::HitKind::kExact) {
    db = hit->db_path;
    choice.collective_measurements = stored_measurements(db, ckey);
  }
  if (!db.empty()) choice.level_fits = stored_level_fits(db, ckey.fingerprint);
}

// What a near hit tells the tuning: its training settings and pipeline layout, and where they
// come from (the database and how the hit differs).
struct NearHint {
  std::optional<recipes::TrainingPlan> training;
  std::optional<recipes::ParallelLayout> layout;
  std::string source;
};

// The hint of a near hit (none for any other kind), with a note saying how it is used.
NearHint near_hint(const PlanRequest& r, const tdb::LookupResult& hit, PlanChoice& choice) {
  NearHint h;
  if (hit.kind != tdb::HitKind::kNear) return h;
  std::string diff;
  for (const auto& d : hit.differences) diff += (diff.empty() ? "" : "; ") + d;
  h.source = hit.db_path + ": " + diff;
  if (auto near = recipes::parse_plan(hit.plan.plan_json)) {
    h.training = near->training;
    if (near->parallel.pipelined()) h.layout = near->parallel;
  }
  choice.notes.push_back("near hit in " + h.source +
                         (r.dry_run ? ": a real launch would narrow its search by it and tune "
                                      "for this exact machine and shape"
                                    : ": narrows the search; tuning for this exact machine "
                                      "and shape"));
  return h;
}

// The trial trainings' request: the recipe over the tuned collectives `base`, the hint, the
// layouts to try, and the time left until `deadline` (epoch seconds).
tuner::RecipeTuneRequest tune_request(const PlanRequest& r, const recipes::Plan& base,
                                      const NearHint& hint, const TrialLayouts& layouts,
                                      double deadline) {
  tuner::RecipeTuneRequest req;
  req.recipe = r.recipe;
  req.recipe_path = r.recipe_path;
  req.job = r.job;
  req.base = base;
  req.deadline = deadline;
  req.budget_s = std::max(0.1, req.deadline - epoch_now());
  req.progress_path = r.work_dir + "/trial_progress.jsonl";
  req.hint = hint.training;
  req.hint_layout = hint.layout;
  req.hint_source = hint.source;
  req.layouts = layouts.layouts;
  req.data_parallel_fits = layouts.data_parallel_fits;
  return req;
}

// The tuned plan into `choice` ("tuned"): its provenance (recipe, budget and what it cut, the
// collectives' regret, the time tuning took since t0).
void take_tuned(const PlanRequest& r, const tuner::RecipeTuneOutcome& tuned,
                const recipes::Plan& base, double budget, std::chrono::steady_clock::time_point t0,
                PlanChoice& choice) {
  choice.plan = tuned.plan;
  choice.plan.set_job(r.job);
  recipes::Provenance& pv = choice.plan.provenance;
  pv.source = recipes::PlanSource::kTuned;
  pv.recipe = r.recipe.name;
  if (!pv.budget_cut.empty()) choice.budget_cut.push_back(pv.budget_cut);
  pv.budget_cut = strings::join(choice.budget_cut, "; ");
  pv.budget_s = budget;
  pv.collective_regret = base.provenance.collective_regret;
  choice.budget_s = budget;
  choice.recipe_outcome = tuner::recipe_outcome_to_json(tuned);
  choice.source = "tuned";
  choice.tuning_s = seconds_since(t0);
  pv.tuning_s = choice.tuning_s;
  choice.db_path = r.layers.user_db;
}

// Tunes here within the recipe's budget: the collectives first (their share of it), then the
// trial trainings on the ranks; the plan and its trials stored under `key` in the user's
// database. Errors: the trials' layouts, the work directory, either tuning, storing.
Status tune_here(const PlanRequest& r, const tdb::Key& key, const NearHint& hint,
                 PlanChoice& choice) {
  const double budget = r.recipe.tune.budget_seconds;
  TrialLayouts layouts;
  if (r.trial_layouts) {
    auto l = r.trial_layouts();
    if (!l) return std::move(l).error();
    layouts = std::move(*l);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const double start = epoch_now();
  const double reserve = std::min(kReserveS, kReserveShare * budget);
  DLTUNE_TRY(paths::make_dirs(r.work_dir));
  auto base = collective_plan(r, choice, start + budget * kCollectiveShare);
  if (!base) return std::move(base).error().wrap("tuning the collectives");
  base->set_job(r.job);
  const double kernel_s = std::clamp(kKernelShare * budget, 1.0, 30.0);
  const tuner::RecipeTuneRequest req =
      tune_request(r, *base, hint, layouts, start + budget - reserve - kernel_s);
  if (r.progress != nullptr) {
    r.progress->phase(layouts.layouts.empty() ? "tuning batch, buckets, overlap"
                                              : "tuning batch, buckets, overlap, layout");
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
  take_tuned(r, *tuned, *base, budget, t0, choice);
  // Each layer's kernel, measured for the plan's batch and threads (plan_kernels.h) in what
  // the budget has left (at least a second), counted in the tuning's time.
  if (r.progress != nullptr) r.progress->status("choosing each layer's kernel by measurement");
  const std::string kernels = choose_plan_kernels(
      *worker, r.recipe_path, &choice.plan, std::max(1.0, start + budget - reserve - epoch_now()));
  if (!kernels.empty()) choice.notes.push_back(kernels);
  choice.tuning_s = seconds_since(t0);
  choice.plan.provenance.tuning_s = choice.tuning_s;
  if (r.predict_sps) {
    // The prediction comes from the models (one rank's compute with the plan's kernels, the
    // fitted allreduce, the engine's overlap), not from the trials that measured it.
    const auto predicted = r.predict_sps(choice.plan, choice);
    choice.plan.provenance.predicted_sps = predicted.value_or(0.0);
  }
  const tdb::Provenance prov = tdb::local_provenance();
  DLTUNE_TRY_CTX(store_or_note(r.layers.user_db, {key, recipes::serialize_plan(choice.plan), prov},
                               {}, tuner::recipe_trial_rows(*tuned, key, prov), choice),
                 "storing the plan and its trials in " + r.layers.user_db);
  return {};
}

Result<PlanChoice> choose_plan_here(const PlanRequest& r) {
  PlanChoice choice;
  const std::string sig = recipes::recipe_signature(r.recipe);
  const tdb::Key key = tuner::db::make_key(r.topo, db_shape(r.job), sig, false);
  auto hit = tdb::lookup_plan(r.layers, key);
  if (!hit) return std::move(hit).error().wrap("looking the plan up");
  for (const std::string& w : hit->warnings) choice.notes.push_back(w);
  if (hit->kind == tdb::HitKind::kExact && !r.retune && use_cached(r, *hit, choice)) return choice;
  const NearHint hint = near_hint(r, *hit, choice);
  const double budget = r.recipe.tune.budget_seconds;
  if (r.no_tune || budget <= 0) {
    choice.plan = recipes::recipe_default_plan(r.recipe, r.job);
    choice.source = "default";
    if (!r.dry_run) stored_models(r, choice);
    if (r.no_tune && !r.dry_run) {
      choice.notes.push_back(r.no_tune_why.empty() ? "--no-tune: running the recipe's own settings"
                                                   : "not tuned: " + r.no_tune_why +
                                                         "; running the recipe's own settings");
    }
    return choice;
  }
  DLTUNE_TRY(tune_here(r, key, hint, choice));
  return choice;
}

}  // namespace

}  // namespace dltune::launcher
