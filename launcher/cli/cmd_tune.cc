// `dltune tune --collectives`: measures which allreduce algorithm (and ring segment size) is
// fastest at each message size for this machine and job shape, stores every measurement and
// the resulting Plan in the user tuning database, and prints them.
//
// Flow: check the arguments; compute the key (topology fingerprint, versions, 1 node x -n
// ranks); unless --retune / --verify, look the plan up through the database layers and stop
// on an exact hit ("cached"); otherwise start -n ranks of dltune-tune-rank (built next to this
// binary) with local_rank_launcher() (`dltune run`, else mpirun, else threads), read rank 0's
// outcome, and store plan + measurements in one transaction. `dltune tune RECIPE` (recipe
// tuning) is launcher/tune_recipe.cc.
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/strings.h"
#include "launcher/backend/rank_program.h"
#include "launcher/backend/temp_dir.h"
#include "launcher/cli/commands.h"
#include "launcher/cli/launch_program.h"
#include "launcher/cli/tune_recipe.h"
#include "launcher/flow/cost_fits.h"
#include "recipes/plan.h"
#include "topology/topology.h"
#include "tuner/collective_plan.h"
#include "tuner/collective_tuning.h"
#include "tuner/db/key.h"
#include "tuner/db/lookup.h"
#include "tuner/db/store.h"

namespace dltune::cli {
namespace {

namespace tdb = tuner::db;

// ---- Starting the ranks (the same route as `dltune bench`: local_rank_launcher()).

struct TuneRankArgs {
  int ranks = 2;
  uint64_t min_bytes = 4, max_bytes = 0;
  std::string strategy;
  double budget_s = 0;
  bool verify = false;
};

// Runs the ranks and returns rank 0's outcome (JSON text).
Result<std::string> run_tune_ranks(const TuneRankArgs& a) {
  auto prog = sibling_program("dltune-tune-rank");
  if (!prog) return prog.error();
  auto dir = launcher::TempDir::create_in_tmp("dltune-tune-");
  if (!dir) return dir.error();
  const std::string out_path = dir->path() + "/outcome.json";
  char budget[32];
  std::snprintf(budget, sizeof budget, "%.3f", a.budget_s);
  std::vector<std::string> args = {*prog,
                                   "--min-bytes",
                                   std::to_string(a.min_bytes),
                                   "--max-bytes",
                                   std::to_string(a.max_bytes),
                                   "--strategy",
                                   a.strategy,
                                   "--budget",
                                   budget,
                                   "--out",
                                   out_path};
  if (a.verify) args.push_back("--verify");
  auto l = local_rank_launcher_or_threads("tune", a.ranks, &args);
  if (!l) return l.error();
  std::vector<std::string> launch = std::move(*l);
  launch.insert(launch.end(), args.begin(), args.end());
  auto rc = run_to_completion(launch, "tune");
  if (!rc) return rc.error();
  if (*rc != 0) {
    return peer_failed("the tuning ranks failed (exit code " + std::to_string(*rc) +
                       "); their messages are above");
  }
  auto text = paths::read_file(out_path);
  if (!text) return std::move(text).error().wrap("reading the tuning outcome");
  return text;
}

struct TuneCliOptions {
  std::string recipe;
  bool collectives = false;
  int ranks = 2;
  double budget_s = 600;
  std::string db;
  std::string strategy = "model";
  bool verify = false;
  bool retune = false;
  std::string min_bytes = "4";
  std::string max_bytes = "256MiB";
  bool json = false;
  bool grid = false;
  bool ranks_given = false, budget_given = false;
  std::string hosts, hostfile;       // -H / --hostfile: a program recipe's nodes over ssh
  std::vector<std::string> exports;  // -x NAME[=VALUE]: a program recipe's trials' variables
};

// Everything a bad command line can get wrong, checked before anything runs.
Status check_options(const TuneCliOptions& o, uint64_t* min_b, uint64_t* max_b) {
  if (!o.collectives) {
    return invalid_input("say what to tune: 'dltune tune RECIPE' or 'dltune tune --collectives'");
  }
  if (o.grid) return invalid_input("--grid applies to recipe tuning ('dltune tune RECIPE')");
  if (o.ranks < 1 || o.ranks > 256) {
    return invalid_input("-n expects 1 to 256 ranks, got " + std::to_string(o.ranks));
  }
  if (!(o.budget_s > 0) || o.budget_s > recipes::kMaxTuneBudgetSeconds) {
    return invalid_input("--budget expects a positive number of seconds, got " +
                         std::to_string(o.budget_s));
  }
  DLTUNE_TRY(tuner::check_strategy(o.strategy));
  auto lo = strings::parse_bytes(o.min_bytes);
  if (!lo) return lo.error().wrap("--min-bytes");
  auto hi = strings::parse_bytes(o.max_bytes);
  if (!hi) return hi.error().wrap("--max-bytes");
  DLTUNE_TRY(tuner::tuning_sizes(*lo, *hi));
  *min_b = *lo;
  *max_b = *hi;
  return ok_status();
}

void print_cached(const TuneCliOptions& o, const tdb::LookupResult& hit,
                  const recipes::Plan& plan) {
  const std::string where =
      hit.db_path + (hit.from_site
                         ? " (site database" + (hit.site.empty() ? "" : " '" + hit.site + "'") + ")"
                         : "");
  if (o.json) {
    nlohmann::json j;
    j["cached"] = true;
    j["db"] = hit.db_path;
    j["from_site"] = hit.from_site;
    j["plan"] = recipes::plan_to_json(plan);
    std::printf("%s\n", j.dump(1).c_str());
    return;
  }
  std::printf(
      "the collective plan for this machine and job shape (1 node x %d ranks) is cached "
      "in %s; use --retune to measure again\n%s",
      o.ranks, where.c_str(), tuner::format_plan_ranges(plan).c_str());
  if (!plan.provenance.reason.empty())
    std::printf("why: %s\n", strings::printable(plan.provenance.reason, "").c_str());
}

// Returns the cached plan's exit code when there is an exact hit, nullopt to go on tuning.
std::optional<int> try_cache(const TuneCliOptions& o, const tdb::Layers& layers,
                             const tdb::Key& key) {
  auto hit = tdb::lookup_plan(layers, key);
  if (!hit) return report_error("tune", hit.error());
  for (const std::string& w : hit->warnings) {
    std::fprintf(stderr, "dltune tune: %s\n", strings::printable(w, "").c_str());
  }
  if (hit->kind != tdb::HitKind::kExact) return std::nullopt;
  auto plan = recipes::parse_plan(hit->plan.plan_json);
  if (!plan) {
    std::fprintf(stderr, "dltune tune: the cached plan in %s does not parse (%s); tuning again\n",
                 hit->db_path.c_str(), plan.error().message().c_str());
    return std::nullopt;
  }
  print_cached(o, *hit, *plan);
  return 0;
}

Status store(const tdb::Layers& layers, const tdb::Key& key, const tuner::TuningOutcome& out,
             const recipes::Plan& plan) {
  const tdb::Provenance prov = tdb::local_provenance();
  return tdb::store_plan(layers.user_db, {key, recipes::serialize_plan(plan), prov},
                         tuner::measurement_rows(out, key, prov));
}

void print_result(const TuneCliOptions& o, const std::string& db_path,
                  const tuner::TuningOutcome& out, const recipes::Plan& plan) {
  if (o.json) {
    nlohmann::json j;
    j["cached"] = false;
    j["db"] = db_path;
    j["outcome"] = tuner::outcome_to_json(out);
    j["plan"] = recipes::plan_to_json(plan);
    std::printf("%s\n", j.dump(1).c_str());
    return;
  }
  std::printf("%s\nplan (stored in %s):\n%s", tuner::format_outcome(out).c_str(), db_path.c_str(),
              tuner::format_plan_ranges(plan).c_str());
}

// Stopped by SIGINT / SIGTERM (forwarded to the ranks, which stopped; the scratch directory
// is gone with its TempDir): 130 / 143, nothing stored.
int interrupted(int sig) {
  std::fprintf(stderr, "dltune tune: stopped by %s; nothing was stored\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM");
  return 128 + sig;
}

int run_tune(const TuneCliOptions& o) {
  // What a tune killed outright (SIGKILL) left behind: its scratch directory.
  launcher::sweep_stale_temp_dirs(paths::temp_root(), "dltune-tune-");
  if (!o.recipe.empty() && launch_phases::is_program_recipe(o.recipe)) {
    if (o.collectives || o.verify || o.strategy != "model") {
      return report_error("tune", invalid_input("--collectives, --verify and --strategy do not "
                                                "apply to a program recipe"));
    }
    launch_phases::LaunchOptions l;
    l.job.recipe = o.recipe;
    l.job.ranks = o.ranks_given ? o.ranks : 0;
    l.db = o.db;
    l.retune = o.retune;
    l.json = o.json;
    l.tune_only = true;
    l.grid = o.grid;
    l.budget_s = o.budget_given ? o.budget_s : 0;
    l.hosts = o.hosts;
    l.hostfile = o.hostfile;
    l.exports = o.exports;
    return launch_phases::run_program_launch(l);
  }
  if (!o.hosts.empty() || !o.hostfile.empty() || !o.exports.empty()) {
    return report_error("tune", invalid_input("-H / --hostfile / -x apply to a program recipe's "
                                              "trials; a model recipe tunes on hosts, or with "
                                              "variables, within `dltune launch RECIPE -H ... "
                                              "-x ...`"));
  }
  if (!o.recipe.empty()) {
    if (o.collectives) {
      return report_error("tune", invalid_input("give a recipe or --collectives, not both"));
    }
    if (o.verify || o.strategy != "model") {
      return report_error("tune", invalid_input("--verify and --strategy apply to --collectives"));
    }
    if (o.ranks_given && (o.ranks < 1 || o.ranks > 256)) {
      return report_error(
          "tune", invalid_input("-n expects 1 to 256 ranks, got " + std::to_string(o.ranks)));
    }
    if (o.budget_given && (!(o.budget_s > 0) || o.budget_s > recipes::kMaxTuneBudgetSeconds)) {
      return report_error("tune", invalid_input("--budget expects a positive number of seconds, "
                                                "got " +
                                                std::to_string(o.budget_s)));
    }
    TuneRecipeOptions r;
    r.recipe = o.recipe;
    r.ranks = o.ranks_given ? o.ranks : 0;
    r.budget_s = o.budget_given ? o.budget_s : 0;
    r.db = o.db;
    r.retune = o.retune;
    r.grid = o.grid;
    r.json = o.json;
    return run_tune_recipe(r);
  }
  uint64_t min_b = 0, max_b = 0;
  if (Status s = check_options(o, &min_b, &max_b); !s.ok()) return report_error("tune", s.error());
  auto layers =
      tdb::layers_from_env(o.db.empty() ? std::nullopt : std::optional<std::string>(o.db));
  if (!layers) return report_error("tune", layers.error());
  auto topo = topology::discover_default();
  if (!topo) return report_error("tune", topo.error().wrap("discovering this machine"));
  const tdb::Key key = tuner::db::make_key(*topo, tdb::JobShape{1, o.ranks}, "", false);
  if (!o.retune && !o.verify) {
    if (auto code = try_cache(o, *layers, key)) return *code;
  }
  // A database that could not take the results refuses now, not after the whole budget.
  if (Status s = tdb::check_can_store(layers->user_db); !s.ok()) {
    return report_error("tune", s.error());
  }

  TuneRankArgs args;
  args.ranks = o.ranks;
  args.min_bytes = min_b;
  args.max_bytes = max_b;
  args.strategy = o.strategy;
  args.budget_s = o.budget_s;
  args.verify = o.verify;
  auto outcome_text = run_tune_ranks(args);
  if (const int sig = forwarded_signal(); sig != 0) return interrupted(sig);
  if (!outcome_text) return report_error("tune", outcome_text.error());
  nlohmann::json j = nlohmann::json::parse(*outcome_text, nullptr, false);
  if (j.is_discarded()) {
    return report_error("tune", internal_error("the tuning ranks wrote an outcome that is not "
                                               "JSON; rerun with DLTUNE_DEBUG=INFO"));
  }
  auto out = tuner::outcome_from_json(j);
  if (!out) return report_error("tune", internal_error(out.error().message()));
  auto plan = tuner::plan_from_outcome(*out);
  if (!plan) return report_error("tune", internal_error(plan.error().message()));
  // Inside a Slurm allocation the ranks may span nodes: the shape is the one they saw.
  tdb::Key stored_key = key;
  if (out->nodes > 0 && out->ranks % out->nodes == 0) {
    stored_key =
        tuner::db::make_key(*topo, tdb::JobShape{out->nodes, out->ranks / out->nodes}, "", false);
  }
  if (Status s = store(*layers, stored_key, *out, *plan); !s.ok()) {
    return report_error("tune", s.error().wrap("storing the plan in " + layers->user_db));
  }
  launcher::store_level_fits(layers->user_db, stored_key);
  print_result(o, layers->user_db, *out, *plan);
  return 0;
}

}  // namespace

void setup_tune(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<TuneCliOptions>();
  auto* cmd = app.add_subcommand(
      "tune",
      "Measure and store the best training configuration for a recipe (RECIPE) or the best "
      "collective algorithms for this machine (--collectives)");
  cmd->add_option("RECIPE", opts->recipe,
                  "Recipe to tune (file or bundled name): batch, scaling, bucket size, overlap");
  cmd->add_flag("--collectives", opts->collectives,
                "Tune the allreduce algorithm per message size for this job shape");
  auto* n_opt = cmd->add_option("-n,--ranks", opts->ranks,
                                "Ranks on this node (recipe: default its launch.ranks)")
                    ->capture_default_str();
  auto* budget_opt =
      cmd->add_option("--budget", opts->budget_s,
                      "Seconds of measurement; stops early and keeps what was measured "
                      "(recipe: default its tune.budget)")
          ->capture_default_str();
  cmd->add_option("--db", opts->db, "User tuning database (default DLTUNE_DB, else XDG data)");
  cmd->add_option("-H,--host", opts->hosts,
                  "HOST[:SLOTS],...: a program recipe's trials run on these machines over ssh, "
                  "as `dltune launch -H` runs them");
  cmd->add_option("--hostfile", opts->hostfile, "FILE of hosts, as -H");
  cmd->add_option("-x", opts->exports,
                  "NAME=VALUE (or NAME: this command's): set in every rank of a program "
                  "recipe's trials, as `dltune launch -x`")
      ->allow_extra_args(false);
  cmd->add_option("--strategy", opts->strategy,
                  "model (fit cost models, measure likely winners) or exhaustive")
      ->capture_default_str();
  cmd->add_flag("--verify", opts->verify,
                "Also measure everything and compare the choices with the oracle's");
  cmd->add_flag("--retune", opts->retune, "Measure again even when a plan is cached");
  cmd->add_option("--min-bytes", opts->min_bytes, "Smallest message (a power of two >= 4)")
      ->capture_default_str();
  cmd->add_option("--max-bytes", opts->max_bytes, "Largest message (at most 1 GiB)")
      ->capture_default_str();
  cmd->add_flag("--grid", opts->grid,
                "Recipe: measure every candidate alike instead of successive halving (reference)");
  cmd->add_flag("--json", opts->json, "Print JSON: {cached, db, outcome, plan}");
  cmd->callback([opts, exit_code, n_opt, budget_opt] {
    opts->ranks_given = n_opt->count() > 0;
    opts->budget_given = budget_opt->count() > 0;
    *exit_code = run_tune(*opts);
  });
}

}  // namespace dltune::cli
