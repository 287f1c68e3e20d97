#include "launcher/cli/tune_recipe.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "launcher/backend/rank_program.h"
#include "launcher/backend/temp_dir.h"
#include "launcher/cli/commands.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"
#include "topology/topology.h"
#include "tuner/db/key.h"
#include "tuner/db/lookup.h"
#include "tuner/db/store.h"

namespace dltune::cli {
namespace {

namespace tdb = tuner::db;
using json = nlohmann::json;

std::string absolute(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

// The exact-hit plan under `key`, nullopt on a miss or an unreadable plan (with a warning).
using Cached = std::optional<std::pair<tdb::LookupResult, recipes::Plan>>;
Result<Cached> cached(const tdb::Layers& layers, const tdb::Key& key) {
  auto hit = tdb::lookup_plan(layers, key);
  if (!hit) return hit.error();
  for (const std::string& w : hit->warnings) {
    std::fprintf(stderr, "dltune tune: %s\n", strings::printable(w, "").c_str());
  }
  if (hit->kind != tdb::HitKind::kExact) return Cached();
  auto plan = recipes::parse_plan(hit->plan.plan_json);
  if (!plan) {
    std::fprintf(stderr, "dltune tune: the cached plan in %s does not parse (%s); ignoring it\n",
                 hit->db_path.c_str(), plan.error().message().c_str());
    return Cached();
  }
  return Cached(std::make_pair(*hit, *plan));
}

void print_training(const recipes::Plan& plan) {
  const auto& t = plan.training;
  std::printf(
      "plan: per-rank batch %lld, global batch %lld, %s scaling, lr x%.3g (warmup %lld steps), "
      "bucket %llu bytes, overlap %s\n",
      static_cast<long long>(t.per_rank_batch), static_cast<long long>(t.global_batch),
      std::string(recipes::scaling_name(t.scaling)).c_str(), t.lr_scale,
      static_cast<long long>(t.warmup_steps), static_cast<unsigned long long>(t.bucket_bytes),
      t.overlap ? "on" : "off");
  if (!plan.provenance.reason.empty())
    std::printf("why: %s\n", strings::printable(plan.provenance.reason, "").c_str());
}

// The winning plan and every trial behind it, in one transaction.
Status store(const tdb::Layers& layers, const tdb::Key& key, const tuner::RecipeTuneOutcome& out) {
  const tdb::Provenance prov = tdb::local_provenance();
  return tdb::store_plan(layers.user_db, {key, recipes::serialize_plan(out.plan), prov}, {},
                         tuner::recipe_trial_rows(out, key, prov));
}

// The recipe checked again for `ranks` ranks where -n overrides its rank count (one node).
// Error: invalid_input listing what the recipe breaks with that many ranks.
Result<recipes::Recipe> with_ranks(const recipes::Recipe& recipe, int ranks) {
  if (recipe.launch.ranks == ranks) return recipe;
  recipes::Recipe r = recipe;
  r.launch.ranks = ranks;
  if (r.launch.ranks_per_node > 0) r.launch.ranks_per_node = ranks;  // one node
  const auto problems = recipes::validate_recipe(r);
  if (!problems.empty()) {
    std::string msg;
    for (const auto& p : problems) msg += (msg.empty() ? "" : "\n") + p.to_string();
    return invalid_input("with " + std::to_string(ranks) + " ranks: " + msg);
  }
  return r;
}

// Prints a cached plan (JSON with --json) instead of tuning.
void print_cached(const TuneRecipeOptions& o, const recipes::Recipe& recipe, int ranks,
                  const tdb::LookupResult& where, const recipes::Plan& plan) {
  if (o.json) {
    json j = {{"cached", true},
              {"db", where.db_path},
              {"from_site", where.from_site},
              {"plan", recipes::plan_to_json(plan)}};
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf(
        "the plan for recipe '%s' on this machine (1 node x %d ranks) is cached in %s; "
        "use --retune to measure again\n",
        recipe.name.c_str(), ranks, where.db_path.c_str());
    print_training(plan);
  }
}

// The tuning request: the recipe on one node of `ranks` ranks within `budget` seconds (a
// deadline, but for the grid), over this shape's cached collective plan, else ring allreduce
// (with a note). Errors: resolving the recipe's path, reading the database.
Result<tuner::RecipeTuneRequest> tune_request(const TuneRecipeOptions& o,
                                              const recipes::Recipe& recipe, int ranks,
                                              double budget, const tdb::Layers& layers,
                                              const topology::Topology& topo) {
  tuner::RecipeTuneRequest req;
  req.recipe = recipe;
  auto path = recipes::resolve_recipe_path(o.recipe);
  if (!path) return path.error();
  req.recipe_path = absolute(*path);
  req.job = {1, ranks};
  req.budget_s = budget;
  // The budget counts the ranks' start-up (a deadline on this clock); the grid, the
  // reference, measures every candidate whatever it takes.
  if (!o.grid) {
    req.deadline =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() +
        budget;
  }
  req.grid = o.grid;
  // The base plan: this shape's collective plan when one is cached.
  const tdb::Key coll_key = tuner::db::make_key(topo, tdb::JobShape{1, ranks}, "", false);
  auto coll = cached(layers, coll_key);
  if (!coll) return coll.error();
  if (*coll) {
    req.base = (*coll)->second;
  } else {
    req.base = recipes::default_plan(1, ranks, tuner::reference_per_rank_batch(recipe, ranks),
                                     recipes::Algorithm::kRing);
    std::fprintf(stderr,
                 "dltune tune: no collective plan cached for 1 node x %d ranks; trials use ring "
                 "allreduce (run 'dltune tune --collectives -n %d' first for tuned collectives)\n",
                 ranks, ranks);
  }
  return req;
}

// Prints the tuning's outcome and where its plan is stored (JSON with --json).
void print_outcome(const TuneRecipeOptions& o, const std::string& db,
                   const tuner::RecipeTuneOutcome& out) {
  if (o.json) {
    json j = {{"cached", false},
              {"db", db},
              {"outcome", tuner::recipe_outcome_to_json(out)},
              {"plan", recipes::plan_to_json(out.plan)}};
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("%splan stored in %s\n", tuner::format_recipe_outcome(out).c_str(), db.c_str());
  }
}

}  // namespace

tuner::RunRanks local_worker_ranks(int ranks) {
  return [ranks](const std::vector<std::string>& worker_args) -> Status {
    auto prog = sibling_program("dltune-worker");
    if (!prog) return prog.error();
    auto launcher = local_rank_launcher(ranks);
    if (!launcher) return launcher.error();
    if (launcher->empty()) {
      return unsupported(
          "recipe tuning needs a launcher for its ranks: build with PMIx, or put mpirun on PATH");
    }
    std::vector<std::string> argv = std::move(*launcher);
    argv.push_back(*prog);
    argv.insert(argv.end(), worker_args.begin(), worker_args.end());
    auto rc = run_to_completion(argv, "tune");
    if (!rc) return rc.error();
    if (*rc != 0) {
      return peer_failed("the trial ranks failed (exit code " + std::to_string(*rc) +
                         "); their messages are above");
    }
    return ok_status();
  };
}

int run_tune_recipe(const TuneRecipeOptions& o) {
  auto loaded = recipes::load_recipe(o.recipe);
  if (!loaded) return report_error("tune", loaded.error());
  const int ranks = o.ranks > 0                ? o.ranks
                    : loaded->launch.ranks > 0 ? static_cast<int>(loaded->launch.ranks)
                                               : 2;
  if (ranks > 256) {
    return report_error("tune",
                        invalid_input("-n expects 1 to 256 ranks, got " + std::to_string(ranks)));
  }
  if (o.budget_s < 0 || o.budget_s > recipes::kMaxTuneBudgetSeconds) {
    return report_error("tune", invalid_input("--budget expects a positive number of seconds"));
  }
  const double budget = o.budget_s > 0 ? o.budget_s : loaded->tune.budget_seconds;
  if (!(budget > 0)) {
    return report_error("tune", invalid_input("the recipe's tune.budget is 0 (do not tune); pass "
                                              "--budget SECONDS to tune anyway"));
  }
  auto recipe = with_ranks(*loaded, ranks);
  if (!recipe) return report_error("tune", recipe.error());

  auto layers =
      tdb::layers_from_env(o.db.empty() ? std::nullopt : std::optional<std::string>(o.db));
  if (!layers) return report_error("tune", layers.error());
  auto topo = topology::discover_default();
  if (!topo) return report_error("tune", topo.error().wrap("discovering this machine"));
  const tdb::Key key = tuner::db::make_key(*topo, tdb::JobShape{1, ranks},
                                           recipes::recipe_signature(*recipe), false);
  if (!o.retune && !o.grid) {
    auto hit = cached(*layers, key);
    if (!hit) return report_error("tune", hit.error());
    if (*hit) {
      print_cached(o, *recipe, ranks, (*hit)->first, (*hit)->second);
      return 0;
    }
  }

  // A database that could not take the results refuses now, not after the whole budget.
  if (Status s = tdb::check_can_store(layers->user_db); !s.ok()) {
    return report_error("tune", s.error());
  }
  auto req = tune_request(o, *recipe, ranks, budget, *layers, *topo);
  if (!req) return report_error("tune", req.error());
  auto work = launcher::TempDir::create_in_tmp("dltune-tune-recipe-");
  if (!work) return report_error("tune", work.error());
  auto out = tuner::tune_recipe(*req, local_worker_ranks(ranks), work->path());
  if (const int sig = forwarded_signal(); sig != 0) {  // SIGINT / SIGTERM: the ranks stopped
    work->remove();
    std::fprintf(stderr, "dltune tune: stopped by signal %d; nothing was stored\n", sig);
    return 128 + sig;
  }
  if (!out) return report_error("tune", out.error());
  out->plan.provenance.recipe = recipe->name;  // db show names it
  if (Status s = store(*layers, key, *out); !s.ok()) {
    return report_error("tune", s.error().wrap("storing the plan in " + layers->user_db));
  }
  print_outcome(o, layers->user_db, *out);
  return 0;
}

}  // namespace dltune::cli
