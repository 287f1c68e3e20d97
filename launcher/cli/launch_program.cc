// `dltune launch` of a program recipe: the phases launch_program.h lists. The program is a
// black box to dltune: every candidate is a fresh run of it (program_run.h), measured by the
// throughput it reports, and the plan that comes out is a Plan like the engine's (its values
// in the plan's batch, bucket and job fields: tuner/program_tuning.h), stored under a key
// whose recipe part is the program's identity (recipes::program_signature: the command, the
// search and the contents of the files the command names), so that an edited script is tuned
// again and an unchanged one is found in the database on the next launch.
#include "launcher/cli/launch_program.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/env.h"
#include "common/paths.h"
#include "common/progress.h"
#include "common/strings.h"
#include "launcher/backend/host_list.h"
#include "launcher/backend/rank_program.h"
#include "launcher/backend/slurm_backend.h"
#include "launcher/backend/ssh_backend.h"
#include "launcher/backend/temp_dir.h"
#include "launcher/cli/commands.h"
#include "launcher/cli/program_run.h"
#include "launcher/flow/launch_job.h"
#include "launcher/flow/text_format.h"
#include "launcher/report/launch_outcome.h"
#include "launcher/report/program_report.h"
#include "recipes/program.h"
#include "tuner/db/key.h"
#include "tuner/db/lookup.h"
#include "tuner/db/store.h"
#include "tuner/program_tuning.h"

namespace dltune::cli::launch_phases {
namespace {

namespace tdb = tuner::db;

struct ProgramLaunch {
  const LaunchOptions* o = nullptr;
  std::chrono::steady_clock::time_point t0;
  recipes::ProgramRecipe recipe;
  topology::Topology topo;
  tuner::ProgramMachine machine;
  tdb::Layers layers;
  std::vector<tuner::ProgramCandidate> candidates;  // the search space on this machine
  std::string signature;                            // the key's recipe part
  std::optional<RunDir> dir;
  std::optional<launcher::RunDirGuard> unless_run;
  std::optional<launcher::TempDir> tmp;  // `dltune tune`: the trials' directory
  tuner::ProgramCandidate chosen;
  recipes::Plan plan;
  std::string source;   // "cache", "tuned" or "default"
  std::string db_path;  // where the plan came from or went ("" default)
  std::optional<tuner::ProgramTuneOutcome> outcome;
  std::vector<std::string> notes;
  std::map<int, recipes::Plan> bases;  // ranks per node -> the collective rules cached for it
  std::vector<std::string> hosts;      // -H / --hostfile: the job's nodes; empty: this machine
  int slurm_nodes = 0;  // > 0: the job's nodes under Slurm (`dltune run --backend slurm`)
  std::vector<std::string> run_options;  // -x / --map-by for every run (run_options_from)
};

using launcher::text::fixed;

// Phase 1. The options a program launch cannot honour are refused before anything runs.
Status open_program(ProgramLaunch& P) {
  const LaunchOptions& o = *P.o;
  if (o.retune && o.no_tune) return invalid_input("--retune and --no-tune exclude each other");
  if (!o.resume.empty()) {
    return invalid_input(
        "--resume continues a model recipe's training from its checkpoint; a "
        "program recipe's program keeps its own checkpoints: launch it again");
  }
  if (!o.sets.empty()) {
    return invalid_input("--set changes a model recipe's keys; edit the program recipe instead");
  }
  auto hosts = launcher::hosts_from_options(o.hosts, o.hostfile);
  if (!hosts) return hosts.error();
  if (!hosts->empty()) {
    if (o.job.backend == "slurm" || o.job.nodes_max > 0) {
      return invalid_input(
          "-H / --hostfile start the ranks over ssh: leave out --backend slurm "
          "and --nodes MIN-MAX");
    }
    auto nodes = launcher::job_hosts(*hosts, o.job.nodes);
    if (!nodes) return nodes.error();
    for (const launcher::HostSlots& n : *nodes) P.hosts.push_back(n.name);
  }
  const bool slurm = P.hosts.empty() &&
                     (o.job.backend == "slurm" ||
                      (o.job.backend.empty() && std::getenv("SLURM_JOB_ID") != nullptr));  // NOLINT
  if (o.job.nodes_max > 0) {
    return invalid_input(
        "--nodes MIN-MAX (a job that goes on after a lost node) is for model "
        "recipes; a program recipe runs on --nodes N");
  }
  if (P.hosts.empty() && !slurm && o.job.nodes > 1) {
    return invalid_input("--nodes " + std::to_string(o.job.nodes) +
                         " needs Slurm (--backend slurm) or hosts (-H / --hostfile)");
  }
  if (slurm) {
    // The allocation's nodes (all of them unless --nodes says fewer); outside one, --nodes
    // (default 1), which run_program_launch() asks salloc for.
    const int allocated = launcher::in_slurm_allocation() ? launcher::allocation_nodes() : 0;
    P.slurm_nodes = o.job.nodes > 0 ? o.job.nodes : std::max(allocated, 1);
    if (allocated > 0 && P.slurm_nodes > allocated) {
      return invalid_input("--nodes " + std::to_string(P.slurm_nodes) + ": this allocation has " +
                           std::to_string(allocated) + " node(s)");
    }
  }
  auto recipe = recipes::load_program_recipe(o.job.recipe);
  if (!recipe) return recipe.error();
  P.recipe = std::move(*recipe);
  auto run_options = run_options_from(o);
  if (!run_options) return run_options.error();
  P.run_options = std::move(*run_options);
  auto bind_to = bind_to_from(o);
  if (!bind_to) return bind_to.error();
  if (!bind_to->empty()) P.recipe.launch.binding = *bind_to;
  if (o.job.ranks > 0) {
    P.recipe.launch.ranks = o.job.ranks;
    if (!P.recipe.search.ranks_per_node.empty() || P.recipe.search.ranks_auto) {
      P.notes.push_back("-n " + std::to_string(o.job.ranks) +
                        " fixes the ranks: tune.search.ranks_per_node is not searched");
      P.recipe.search.ranks_per_node.clear();
      P.recipe.search.ranks_auto = false;
    }
  }
  auto topo = topology::discover_default();
  if (!topo) return topo.error().wrap("discovering this machine");
  P.topo = std::move(*topo);
  // Over hosts none of which is this machine, the first host's own topology (ssh_backend.h).
  std::string asked;
  if (auto t = launcher::hosts_own_topology(P.hosts, P.run_options,
                                            launcher::kHostTopologyTimeoutMs, &asked)) {
    P.topo = std::move(*t);
    P.notes.push_back("planned with " + P.hosts[0] +
                      "'s own topology (asked over ssh: " + std::to_string(P.topo.cores.size()) +
                      " cores), the other hosts taken to be alike");
  }
  if (!asked.empty()) P.notes.push_back(asked);
  P.machine = tuner::program_machine(P.topo);
  // Over hosts or Slurm nodes, each is a node like that machine (its cores bound the ranks x
  // threads).
  if (!P.hosts.empty()) P.machine.nodes = static_cast<int>(P.hosts.size());
  if (P.slurm_nodes > 0) P.machine.nodes = P.slurm_nodes;
  auto layers =
      tdb::layers_from_env(o.db.empty() ? std::nullopt : std::optional<std::string>(o.db));
  if (!layers) return layers.error();
  P.layers = *layers;
  auto candidates = tuner::program_candidates(P.recipe, P.machine);
  if (!candidates) return candidates.error().wrap(P.recipe.source_path);
  P.candidates = std::move(*candidates);
  P.signature = recipes::program_signature(P.recipe);
  return ok_status();
}

// The collective rules cached for `rpn` ranks per node (`dltune tune --collectives` stores
// them), as the base of the program's plan; a plan without rules when none are cached.
const recipes::Plan& base_for(ProgramLaunch& P, int rpn) {
  auto it = P.bases.find(rpn);
  if (it != P.bases.end()) return it->second;
  recipes::Plan base;
  const tdb::JobShape shape{P.machine.nodes, rpn};
  auto hit = tdb::lookup_plan(P.layers, tdb::make_key(P.topo, shape, "", false));
  if (hit && hit->kind == tdb::HitKind::kExact) {
    auto plan = recipes::parse_plan(hit->plan.plan_json);
    if (plan) base.collectives = plan->collectives;
  }
  return P.bases.emplace(rpn, std::move(base)).first->second;
}

// The plan `c` runs with, written to `path` for `dltune run --plan`.
Result<std::string> write_plan(ProgramLaunch& P, const tuner::ProgramCandidate& c,
                               const recipes::Provenance& pv, const std::string& path) {
  const recipes::Plan plan =
      tuner::program_plan(P.recipe, c, P.machine.nodes, base_for(P, c.values.ranks_per_node), pv);
  DLTUNE_TRY(paths::write_file_atomic(path, recipes::serialize_plan(plan)));
  return path;
}

// The search's first values: the program's settings when nothing is tuned.
Result<tuner::ProgramCandidate> default_candidate(const ProgramLaunch& P) {
  recipes::ProgramRecipe r = P.recipe;
  for (auto* list : {&r.search.batch, &r.search.threads_per_rank, &r.search.ranks_per_node}) {
    if (list->size() > 1) list->resize(1);
  }
  if (r.search.bucket_mb.size() > 1) r.search.bucket_mb.resize(1);
  r.search.threads_auto = r.search.ranks_auto = false;
  auto c = tuner::program_candidates(r, P.machine);
  if (!c) return c.error();
  return c->front();
}

// A cached plan for this program and job, when one fits the recipe's search: each shape the
// search may choose is a key of its own (the plan's shape), the newest fitting plan wins.
bool from_cache(ProgramLaunch& P) {
  if (P.o->retune) return false;
  std::optional<tdb::LookupResult> best;
  for (const tdb::JobShape& shape : tuner::program_key_shapes(P.candidates, P.machine.nodes)) {
    auto hit = tdb::lookup_plan(P.layers, tdb::make_key(P.topo, shape, P.signature, false));
    if (!hit) {
      P.notes.push_back("the tuning database could not be read: " + hit.error().message());
      return false;
    }
    for (const std::string& w : hit->warnings) P.notes.push_back(w);
    if (hit->kind != tdb::HitKind::kExact) continue;
    auto plan = recipes::parse_plan(hit->plan.plan_json);
    auto c = plan ? tuner::values_from_plan(P.recipe, P.machine, *plan)
                  : Result<tuner::ProgramCandidate>(plan.error());
    if (!c) {
      P.notes.push_back("the cached plan in " + hit->db_path + " does not fit this recipe (" +
                        c.error().message() + "); it is not used");
      continue;
    }
    if (best && best->plan.provenance.created_at >= hit->plan.provenance.created_at) continue;
    best = std::move(*hit);
    P.chosen = *c;
    P.plan = *plan;
  }
  if (!best) return false;
  P.source = "cache";
  P.db_path = best->db_path;
  return true;
}

// tune.budget, or `dltune tune --budget`.
double budget_s(const ProgramLaunch& P) {
  return P.o->budget_s > 0 ? P.o->budget_s : P.recipe.budget_seconds;
}

// Phase 2 on a miss: the search, each trial a run of the program under RUN_DIR/tuning/.
Status tune(ProgramLaunch& P, Progress& progress) {
  DLTUNE_TRY(tdb::check_can_store(P.layers.user_db));
  progress.phase("tuning " + P.recipe.name + " (" + std::to_string(P.candidates.size()) +
                 " candidates, tune.budget " + fixed(budget_s(P), 0) + " s)");
  int trial = 0;
  bool interrupted = false;
  recipes::Provenance trial_pv;
  trial_pv.reason = "a trial of the program's tuning";
  auto run_trial = [&](const tuner::ProgramCandidate& c, int64_t steps, double seconds,
                       double timeout_s) {
    tuner::ProgramTrialResult failed;
    failed.failed = true;
    failed.reason = "interrupted";
    if (interrupted || forwarded_signal() != 0) return failed;
    const std::string dir = P.dir->file("tuning/trial-" + std::to_string(++trial));
    progress.status("trial " + std::to_string(trial) + ": " + c.label + ", " +
                    std::to_string(steps) + " steps");
    ProgramRun run;
    run.recipe = &P.recipe;
    run.values = c.values;
    run.binding = P.recipe.launch.binding;
    run.run_options = P.run_options;
    run.hosts = P.hosts;
    run.slurm_nodes = P.slurm_nodes;
    run.values.steps = steps;
    run.out_dir = dir;
    run.timeout_s = timeout_s;
    run.trial_steps = steps;
    run.trial_seconds = seconds;
    if (Status s = paths::make_dirs(dir); !s.ok()) return failed;
    auto plan = write_plan(P, c, trial_pv, dir + "/plan.json");
    if (plan) run.plan_file = *plan;
    auto r = run_program(run);
    if (!r) {
      failed.reason = r.error().message();
      return failed;
    }
    interrupted = r->interrupted;
    return trial_result(*r, timeout_s);
  };
  tuner::ProgramTuneOptions opt;
  opt.budget_s = budget_s(P);
  opt.grid = P.o->grid;
  opt.first_steps = P.recipe.trial_steps;
  opt.timeout_s = P.recipe.trial_timeout_s;
  opt.screening = P.recipe.screening != "off";
  auto outcome = tuner::tune_program(P.candidates, run_trial, opt);
  progress.finish();
  if (interrupted || forwarded_signal() != 0) {
    return Error{ErrorKind::kInternal, "the tuning was interrupted"};
  }
  if (!outcome) return std::move(outcome).error().wrap("tuning " + P.recipe.name);
  P.outcome = std::move(*outcome);
  P.chosen = P.outcome->candidates[P.outcome->winner];
  recipes::Provenance pv;
  pv.source = recipes::PlanSource::kTuned;
  pv.reason = P.outcome->reason;
  pv.measured_sps = P.outcome->winner_sps;
  pv.recipe = P.recipe.name;
  pv.budget_s = budget_s(P);
  pv.tuning_s = P.outcome->tuning_s;
  P.plan = tuner::program_plan(P.recipe, P.chosen, P.machine.nodes,
                               base_for(P, P.chosen.values.ranks_per_node), pv);
  P.source = "tuned";
  const tdb::Provenance prov = tdb::local_provenance();
  const tdb::Key key =
      tdb::make_key(P.topo, {P.machine.nodes, P.chosen.values.ranks_per_node}, P.signature, false);
  const auto rows = tuner::program_trial_rows(*P.outcome, key, prov);
  Status s =
      tdb::store_plan(P.layers.user_db, {key, recipes::serialize_plan(P.plan), prov}, {}, rows);
  if (!s.ok()) return s.error().wrap("storing the plan in " + P.layers.user_db);
  P.db_path = P.layers.user_db;
  return ok_status();
}

// Phase 2: the plan.
Status choose(ProgramLaunch& P, Progress& progress) {
  if (P.o->tune_only) {
    auto t = launcher::TempDir::create_in_tmp("dltune-tune-");
    if (!t) return t.error();
    P.tmp.emplace(std::move(*t));
    P.dir = RunDir{P.tmp->path()};
    if (!from_cache(P)) return tune(P, progress);
    return ok_status();
  }
  if (!P.o->dry_run) {
    auto rd = launcher::create_run_dir(env::get(env::kRunsDir), P.recipe.name);
    if (!rd) return rd.error();
    P.dir = *rd;
    P.unless_run.emplace(P.dir->path);
  }
  if (from_cache(P)) return ok_status();
  if (!P.o->no_tune && !P.o->dry_run && budget_s(P) > 0) return tune(P, progress);
  auto c = default_candidate(P);
  if (!c) return c.error();
  P.chosen = *c;
  recipes::Provenance pv;
  pv.reason = "not tuned: the search's first values";
  pv.recipe = P.recipe.name;
  P.plan = tuner::program_plan(P.recipe, P.chosen, P.machine.nodes,
                               base_for(P, P.chosen.values.ranks_per_node), pv);
  P.source = "default";
  return ok_status();
}

ProgramRun final_run(const ProgramLaunch& P, const std::string& out_dir) {
  ProgramRun run;
  run.recipe = &P.recipe;
  run.values = P.chosen.values;
  run.binding = P.recipe.launch.binding;
  run.run_options = P.run_options;
  run.hosts = P.hosts;
  run.slurm_nodes = P.slurm_nodes;
  run.values.steps = P.recipe.steps;
  run.out_dir = out_dir;
  run.pass_through = !P.o->json;
  run.tag_output = P.o->tag_output;
  run.timestamp_output = P.o->timestamp_output;
  return run;
}

std::string plan_words(const ProgramLaunch& P) {
  const recipes::ProgramValues& v = P.chosen.values;
  std::string s;
  if (v.batch > 0) s += "batch " + std::to_string(v.batch) + " per rank, ";
  s += std::to_string(v.ranks) + " rank" + (v.ranks == 1 ? "" : "s") + " x " +
       std::to_string(v.threads_per_rank) + " thread" + (v.threads_per_rank == 1 ? "" : "s");
  if (v.bucket_mb > 0) s += ", bucket " + fixed(v.bucket_mb, v.bucket_mb < 1 ? 2 : 0) + " MB";
  if (!P.plan.collectives.empty()) s += ", the cached collective rules";
  return s;
}

int dry_run(ProgramLaunch& P) {
  ProgramRun run = final_run(P, "RUN_DIR");
  run.plan_file = "RUN_DIR/plan.json";
  auto argv = program_run_argv(run);
  if (!argv) return report_error("launch", argv.error());
  (*argv)[0] = "dltune";
  if (P.o->json) {
    nlohmann::json j = {{"event", "dry_run"},      {"recipe", P.recipe.name},
                        {"plan_source", P.source}, {"plan", recipes::plan_to_json(P.plan)},
                        {"command", *argv},        {"cwd", P.recipe.source_dir},
                        {"notes", P.notes}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  for (const std::string& n : P.notes) std::printf("%s\n", n.c_str());
  std::printf("program recipe %s: %s\n", P.recipe.name.c_str(),
              P.source == "cache" ? ("plan cached in " + P.db_path).c_str()
                                  : "not tuned (a launch tunes it within tune.budget)");
  std::printf("plan: %s\n", plan_words(P).c_str());
  std::printf("in %s, a launch runs:\n  %s\n", P.recipe.source_dir.c_str(),
              launcher::quote_argv(*argv).c_str());
  return 0;
}

// Phase 3: the run directory's plan.json, recipe.yaml and launch.json.
Status record(const ProgramLaunch& P, const std::vector<std::string>& argv) {
  const RunDir& dir = *P.dir;
  DLTUNE_TRY(paths::write_file_atomic(dir.plan(), recipes::serialize_plan(P.plan)));
  // The recipe as run; the program ran in the recipe's folder, which the YAML does not hold.
  DLTUNE_TRY(paths::write_file_atomic(dir.recipe(), "# " + P.recipe.source_path + ", run in " +
                                                        P.recipe.source_dir + "\n" +
                                                        recipes::program_recipe_to_yaml(P.recipe)));
  const nlohmann::json lj = {
      {"recipe", P.recipe.name},    {"program", true},    {"ranks", P.chosen.values.ranks},
      {"nodes", P.machine.nodes},   {"backend", "local"}, {"plan_source", P.source},
      {"cwd", P.recipe.source_dir}, {"command", argv}};
  return paths::write_file_atomic(dir.launch(), lj.dump(2) + "\n");
}

nlohmann::json candidates_json(const tuner::ProgramTuneOutcome& out) {
  nlohmann::json a = nlohmann::json::array();
  for (const tuner::ProgramTrialRow& t : out.trials) {
    a.push_back({{"candidate", out.candidates[t.candidate].label},
                 {"round", t.round},
                 {"steps", t.steps},
                 {"samples_per_s", t.samples_per_s},
                 {"wall_s", t.wall_s},
                 {"failed", t.failed},
                 {"reason", t.reason}});
  }
  return a;
}

// The first round's screening (null when it did not screen): the design measured first, the
// candidates set aside with the model's prediction, the fit's residual and margin (log rate).
nlohmann::json screening_json(const tuner::ProgramTuneOutcome& out) {
  if (!out.screened) return nullptr;
  nlohmann::json design = nlohmann::json::array(), aside = nlohmann::json::array();
  for (size_t i : out.design) design.push_back(out.candidates[i].label);
  for (size_t i : out.set_aside) {
    aside.push_back(
        {{"candidate", out.candidates[i].label}, {"predicted_sps", out.predicted_sps[i]}});
  }
  return {{"design", design},
          {"set_aside", aside},
          {"model_residual", out.model_rms},
          {"margin", out.margin},
          {"note", out.screening_note}};
}

nlohmann::json values_json(const ProgramLaunch& P) {
  const recipes::ProgramValues& v = P.chosen.values;
  return {{"batch", v.batch},
          {"ranks", v.ranks},
          {"ranks_per_node", v.ranks_per_node},
          {"threads_per_rank", v.threads_per_rank},
          {"bucket_mb", v.bucket_mb}};
}

// Phase 5: summary.json and the summary.
Status summarize(const ProgramLaunch& P, const ProgramRunResult& r, const std::string& out_dir) {
  nlohmann::json s = {{"recipe", P.recipe.name},       {"program", true},
                      {"exit_code", r.exit_code},      {"throughput_sps", r.samples_per_s},
                      {"wall_seconds", since(P.t0)},   {"run_seconds", r.wall_s},
                      {"plan_source", P.source},       {"plan", recipes::plan_to_json(P.plan)},
                      {"values", values_json(P)},      {"reason", P.plan.provenance.reason},
                      {"output", out_dir + "/output"}, {"run_dir", P.dir->path}};
  if (!r.throughput_error.empty()) s["throughput_error"] = r.throughput_error;
  if (P.outcome) {
    s["trials"] = candidates_json(*P.outcome);
    s["screening"] = screening_json(*P.outcome);
  }
  DLTUNE_TRY(paths::write_file_atomic(P.dir->summary(), s.dump(2) + "\n"));
  DLTUNE_TRY(paths::write_file_atomic(P.dir->report(), report::render_program_report_html(s)));
  if (P.o->json) {
    s["event"] = "summary";
    std::printf("%s\n", s.dump().c_str());
    return ok_status();
  }
  std::string text = "\n" + P.recipe.name + ": ";
  text += r.samples_per_s > 0 ? fixed(r.samples_per_s, 1) + " samples/s"
                              : "no throughput (" + r.throughput_error + ")";
  text += " in " + fixed(r.wall_s, 1) + " s\n  plan (" + P.source +
          (P.db_path.empty() ? "" : ", " + P.db_path) + "): " + plan_words(P) + "\n";
  if (!P.plan.provenance.reason.empty()) {
    text += "  " + launcher::wrap_words("why: " + P.plan.provenance.reason, 96, 7) + "\n";
  }
  if (P.outcome) text += tuner::format_program_outcome(*P.outcome);
  text += "  run directory: " + P.dir->path + " (report.html: the run and every candidate)\n";
  std::printf("%s", text.c_str());
  return ok_status();
}

// `dltune tune`: the plan and how it was found, as the model recipes' tune prints it.
int print_tuned(const ProgramLaunch& P) {
  if (P.o->json) {
    nlohmann::json j = {{"cached", P.source == "cache"},
                        {"db", P.db_path},
                        {"plan", recipes::plan_to_json(P.plan)},
                        {"values", values_json(P)}};
    if (P.outcome) {
      j["outcome"] = {{"trials", candidates_json(*P.outcome)},
                      {"rounds", P.outcome->rounds},
                      {"grid", P.outcome->grid},
                      {"tuning_s", P.outcome->tuning_s},
                      {"budget_exhausted", P.outcome->budget_exhausted},
                      {"screening", screening_json(*P.outcome)},
                      {"winner", P.chosen.label},
                      {"winner_sps", P.outcome->winner_sps}};
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  for (const std::string& n : P.notes) std::printf("%s\n", n.c_str());
  if (P.outcome) std::printf("%s", tuner::format_program_outcome(*P.outcome).c_str());
  std::printf("plan for %s (%s, %s): %s\n", P.recipe.name.c_str(), P.source.c_str(),
              P.db_path.c_str(), plan_words(P).c_str());
  return 0;
}

// Phases 3-5.
int run_and_summarize(ProgramLaunch& P, Progress& progress) {
  const std::string out_dir = P.dir->path;
  ProgramRun run = final_run(P, out_dir);
  run.plan_file = P.dir->plan();
  auto argv = program_run_argv(run);
  if (!argv) return report_error("launch", argv.error());
  if (Status s = record(P, *argv); !s) {
    return report_error("launch", s.error().wrap("writing the run directory"));
  }
  for (const std::string& n : P.notes) progress.message(n);
  progress.message("plan: " + plan_words(P) + " (" + P.source + ")");
  progress.message("run directory: " + P.dir->path);
  if (P.unless_run) P.unless_run->keep();
  std::fflush(stdout);
  // launch.restarts (or --max-restarts): a program that fails is started again as it was, on
  // the same ranks; it resumes from its own checkpoints, which dltune does not know of.
  const int restarts =
      P.o->max_restarts >= 0 ? P.o->max_restarts : static_cast<int>(P.recipe.launch.restarts);
  auto r = run_program(run);
  for (int k = 1; r && r->exit_code != 0 && !r->interrupted && k <= restarts; ++k) {
    progress.message(
        "the program failed (" +
        (r->message.empty() ? "exit code " + std::to_string(r->exit_code) : r->message) +
        "); starting it again, restart " + std::to_string(k) + " of " + std::to_string(restarts));
    r = run_program(run);
  }
  if (!r) return report_error("launch", r.error());
  if (r->exit_code != 0) {
    std::fprintf(stderr, "dltune launch: %s failed: %s\n", P.recipe.name.c_str(),
                 r->message.empty() ? "see its output above" : r->message.c_str());
    return r->exit_code;
  }
  if (Status s = summarize(P, *r, out_dir); !s) return report_error("launch", s.error());
  return 0;
}

}  // namespace

bool is_program_recipe(const std::string& recipe) {
  auto path = recipes::resolve_recipe_path(recipe);
  if (!path) return false;
  auto text = paths::read_file(*path);
  return text && recipes::names_program(*text);
}

int run_program_launch(const LaunchOptions& o) {
  ProgramLaunch P;
  P.o = &o;
  P.t0 = std::chrono::steady_clock::now();
  if (Status s = open_program(P); !s) return report_error("launch", s.error());
  // Under Slurm outside an allocation: the whole launch runs again under salloc, with tasks
  // for the largest candidate, so that every trial and the final run get the same nodes.
  if (P.slurm_nodes > 0 && !launcher::in_slurm_allocation() && !o.dry_run) {
    int most = 1;
    for (const tuner::ProgramCandidate& c : P.candidates) {
      most = std::max(most, c.values.ranks_per_node);
    }
    Status s = launcher::rerun_in_allocation(P.slurm_nodes, P.slurm_nodes * most);
    return report_error("launch", s.error());  // only reached when salloc could not start
  }
  Progress progress(Progress::detect(o.json, stdout), stdout);
  if (Status s = choose(P, progress); !s) {
    const int code = forwarded_signal() != 0 ? 128 + forwarded_signal() : 0;
    const int rc = report_error("launch", s.error());
    return code != 0 ? code : rc;
  }
  if (o.dry_run) return dry_run(P);
  if (o.tune_only) return print_tuned(P);
  return run_and_summarize(P, progress);
}

}  // namespace dltune::cli::launch_phases
