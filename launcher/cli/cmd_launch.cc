// `dltune launch RECIPE [-n RANKS] [--nodes N|MIN-MAX] [--backend local|slurm]
//  [--retune|--no-tune] [--db PATH] [--resume RUN_DIR] [--dry-run] [--json] [--set KEY=VALUE]...`:
// DESIGN.md's main flow, as phases run_launch() calls in order:
//
//   open_job       the recipe with its --set changes (or a run directory's, --resume), the
//                  machine, the job shape;
//   choose         the Plan: the run directory's (--resume), else the databases' or a tuning's
//                  (launch_plan.h), laid over the ranks (launch_layout.h) and placed on the
//                  node's cores (its placement);
//   (--dry-run     prints all of it and stops)
//   record         the run directory: plan.json and recipe.yaml, what the ranks run, and
//                  launch.json, how they were started;
//   train          the ranks, given that plan and recipe (PMIx job data), following rank 0's
//                  metrics, and the restarts after a failure (launch_train.cc);
//   summarize      the 1-rank baseline, summary.json, report.html and the summary printed.
//
// Every phase shows its progress (launch_progress.h). The ranks build their engine
// configuration from the plan and recipe themselves (engine/worker/rank_job.h): nothing else
// crosses to them but the run directory's path. What the phases share is in launch_state.h.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/env.h"
#include "common/json_input.h"
#include "common/paths.h"
#include "common/progress.h"
#include "common/strings.h"
#include "engine/data/dataset.h"
#include "launcher/backend/host_list.h"
#include "launcher/backend/rank_program.h"
#include "launcher/backend/slurm_backend.h"
#include "launcher/backend/ssh_backend.h"
#include "launcher/backend/temp_dir.h"
#include "launcher/cli/commands.h"
#include "launcher/cli/launch_dry_run.h"
#include "launcher/cli/launch_program.h"
#include "launcher/cli/launch_state.h"
#include "launcher/flow/baseline_reuse.h"
#include "launcher/flow/launch_job.h"
#include "launcher/flow/launch_layout.h"
#include "launcher/flow/launch_plan.h"
#include "launcher/flow/launch_prediction.h"
#include "launcher/flow/launch_progress.h"
#include "launcher/flow/reshape.h"
#include "launcher/flow/restarts.h"
#include "launcher/flow/run_dir.h"
#include "launcher/report/launch_outcome.h"
#include "recipes/datasets.h"
#include "recipes/plan_fit.h"
#include "recipes/recipe_overrides.h"
#include "tuner/recipe_tuning.h"

namespace dltune::cli {
namespace launch_phases {

using launcher::RunDir;

// The width the summary is wrapped at: the terminal's, else 100 columns.
int summary_width() {
  struct winsize ws {};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40) {
    return ws.ws_col;
  }
  return 100;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --resume: the job as its run directory's launch.json and recipe.yaml describe it. launch.json
// is read back from a directory anyone may have edited: a field of the wrong type is an error
// that names it, never an exception.
Status open_resumed(Launch& L) {
  auto rd = launcher::open_run_dir(L.o->resume);
  if (!rd) return rd.error();
  L.resumed = *rd;
  const std::string where = "--resume " + L.o->resume + ": " + rd->launch();
  auto text = paths::read_file(rd->launch());
  auto lj = text ? parse_json_bounded(*text).value_or(nlohmann::json()) : nlohmann::json();
  if (!lj.is_object()) return invalid_input(where + " is missing or not JSON");
  if (lj.contains("backend") && !lj["backend"].is_string())
    return invalid_input(where + ": 'backend' must be a string");
  for (const char* k : {"ranks", "nodes"}) {
    if (lj.contains(k) && !(lj[k].is_number_integer() && lj[k].get<int64_t>() >= 0 &&
                            lj[k].get<int64_t>() <= (int64_t{1} << 20))) {
      return invalid_input(where + ": '" + k + "' must be a whole number from 0 to 1048576");
    }
  }
  // The hosts it ran on (-H), again unless this --resume names its own.
  if (lj.contains("hosts") && L.jo.hosts.empty()) {
    const nlohmann::json& hs = lj["hosts"];
    if (!hs.is_array() || hs.size() > 4096)
      return invalid_input(where + ": 'hosts' must be a list");
    std::string list;
    for (const auto& h : hs) {
      if (!h.is_string()) return invalid_input(where + ": 'hosts' must be a list of host names");
      list += (list.empty() ? "" : ",") + h.get<std::string>();
    }
    auto hosts = launcher::parse_host_option(list);
    if (!hosts) return std::move(hosts).error().wrap(where + ": 'hosts'");
    L.jo.hosts = std::move(*hosts);
  }
  // The nodes the run lost (Slurm): left out again where this allocation has them.
  if (lj.contains("exclude")) {
    const nlohmann::json& ex = lj["exclude"];
    const bool names = ex.is_array() && ex.size() <= 4096 &&
                       std::all_of(ex.begin(), ex.end(), [](const nlohmann::json& n) {
                         return n.is_string() && !n.get<std::string>().empty() &&
                                n.get<std::string>().size() <= 255 &&
                                strings::find_control(n.get<std::string>()) == std::string::npos;
                       });
    if (!names) return invalid_input(where + ": 'exclude' must be a list of node names");
    auto here = launcher::in_slurm_allocation()
                    ? launcher::job_nodes(launcher::allocation_nodes(), {})
                    : Result<std::vector<std::string>>(std::vector<std::string>());
    std::vector<std::string> left_out;
    for (const auto& n : ex) {
      const std::string node = n.get<std::string>();
      // Outside an allocation (the launch obtains one and runs again) or where its nodes
      // cannot be listed, every lost node is kept: the allocation's own are told apart there.
      const bool in_allocation =
          !here || here->empty() || std::find(here->begin(), here->end(), node) != here->end();
      if (in_allocation) L.jo.exclude.push_back(node);
      if (in_allocation && here && !here->empty()) left_out.push_back(node);
    }
    if (!left_out.empty()) {
      std::fprintf(stderr,
                   "dltune launch: --resume: leaving out node(s) %s, lost during the run "
                   "(launch.json 'exclude')\n",
                   strings::printable(strings::join(left_out, ", "), "").c_str());
    }
  }
  L.jo.recipe = rd->recipe();  // the recipe as run
  if (lj.contains("nodes_range")) {
    const nlohmann::json& r = lj["nodes_range"];
    const auto count = [](const nlohmann::json& v) {
      return v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 4096;
    };
    if (!(r.is_array() && r.size() == 2 && count(r[0]) && count(r[1]) &&
          r[0].get<int64_t>() < r[1].get<int64_t>()))
      return invalid_input(where + ": 'nodes_range' must be [MIN, MAX], 1 <= MIN < MAX <= 4096");
    // The run's --nodes MIN-MAX again, unless this --resume gives its own shape.
    if (L.jo.nodes == 0 && L.jo.ranks == 0) {
      L.jo.nodes = r[0].get<int>();
      L.jo.nodes_max = r[1].get<int>();
    }
  }
  if (L.jo.ranks == 0 && L.jo.nodes_max == 0) L.jo.ranks = lj.value("ranks", 0);
  if (L.jo.nodes == 0) L.jo.nodes = lj.value("nodes", 0);
  if (L.jo.backend.empty()) L.jo.backend = lj.value("backend", "");
  return ok_status();
}

// Phase 1: the recipe with its overrides, the machine and the job shape.
Status open_job(Launch& L) {
  const LaunchOptions& o = *L.o;
  if (o.retune && o.no_tune) return invalid_input("--retune and --no-tune exclude each other");
  if (!o.resume.empty() && !o.sets.empty()) {
    return invalid_input(
        "--set changes a recipe, and a resumed run continues its own (the run directory's "
        "recipe.yaml); leave out --set or --resume");
  }
  L.jo = o.job;
  auto hosts = launcher::hosts_from_options(o.hosts, o.hostfile);
  if (!hosts) return hosts.error();
  L.jo.hosts = std::move(*hosts);
  auto run_options = run_options_from(o);
  if (!run_options) return run_options.error();
  L.jo.run_options = std::move(*run_options);
  auto bind_to = bind_to_from(o);
  if (!bind_to) return bind_to.error();
  if (!bind_to->empty()) {
    if (!o.resume.empty()) {
      return invalid_input(
          "--bind-to sets the recipe's launch.binding, and a resumed run keeps "
          "its own; leave out --bind-to or --resume");
    }
    auto ov = recipes::parse_override("launch.binding=" + *bind_to);
    if (!ov) return ov.error();
    L.jo.overrides.push_back(*ov);
  }
  for (const std::string& text : o.sets) {
    auto ov = recipes::parse_override(text);
    if (!ov) return ov.error();
    L.jo.overrides.push_back(*ov);
  }
  auto topo = topology::discover_default();
  if (!topo) return topo.error().wrap("discovering this machine");
  L.topo = std::move(*topo);
  L.cores = static_cast<int>(L.topo.cores.size());
  auto worker = sibling_program("dltune-worker");
  if (!worker) return worker.error();
  L.worker = *worker;
  if (!o.resume.empty()) DLTUNE_TRY(open_resumed(L));
  // Over hosts none of which is this machine (a login node): the first host's own topology
  // plans the job, and keys its tuning (the trials run there).
  std::string asked;
  std::vector<std::string> host_names;
  for (const launcher::HostSlots& h : L.jo.hosts) host_names.push_back(h.name);
  if (auto t = launcher::hosts_own_topology(host_names, L.jo.run_options,
                                            launcher::kHostTopologyTimeoutMs, &asked)) {
    L.topo = std::move(*t);
    L.cores = static_cast<int>(L.topo.cores.size());
  }
  auto job = launcher::make_job(L.jo, L.topo);
  if (!job) return job.error();
  L.job = std::move(*job);
  if (!asked.empty()) L.job.notes.push_back(asked);
  L.recipe_file = L.job.recipe.source_path;
  // The programs that read the recipe before the run directory exists (the dry run's, a
  // tuning's trials) read it as run: the overrides applied, data paths absolute.
  auto t = launcher::TempDir::create_in_tmp("dltune-recipe-");
  if (!t) return t.error();
  L.tmp = std::move(*t);
  auto text = recipes::recipe_yaml_as_run(L.job.recipe_path, L.job.recipe, L.jo.overrides);
  if (!text) return text.error();
  const std::string path = L.tmp->path() + "/recipe.yaml";
  DLTUNE_TRY(paths::write_file_atomic(path, *text));
  L.job.recipe_path = path;
  return ok_status();
}

// The recipe tuner's trials measure the promising pipeline layouts of the memory model beside
// data parallelism (only the layouts when data parallelism does not fit), at the trials'
// reference batch; asked only when the trials run.
Result<launcher::TrialLayouts> trial_layouts(const Launch& L) {
  launcher::LayoutQuery lq;
  lq.worker = L.worker;
  lq.recipe_path = L.job.recipe_path;
  lq.ranks = L.job.ranks;
  lq.ranks_per_node = L.job.shape.ranks_per_node;
  const tuner::LayoutBatch b = tuner::layout_reference_batch(L.job.recipe, L.job.ranks);
  lq.batch = b.samples;
  lq.per_replica = b.per_replica;
  lq.measure = launcher::LayoutQuery::Measure::kForTrials;
  auto layouts = launcher::query_layouts(lq);
  if (!layouts) return std::move(layouts).error();
  return launcher::tuning_layouts(*layouts);
}

// The layout: the memory model's choice for the plan's batch (a layout that does not fit is
// refused here, saying by how much and what would fit). A dry run starts nothing: FLOPs.
Status lay_out(const Launch& L, recipes::Plan* plan) {
  launcher::LayoutQuery lq;
  lq.worker = L.worker;
  lq.recipe_path = L.job.recipe_path;
  lq.ranks = L.job.ranks;
  lq.ranks_per_node = L.job.shape.ranks_per_node;
  lq.measure = L.o->dry_run ? launcher::LayoutQuery::Measure::kNever
                            : launcher::LayoutQuery::Measure::kForChoice;
  return launcher::apply_layout(lq, plan);
}

// The node's cores, GPU and NIC for each local rank, as the recipe's launch.binding places
// them (none: no placement, the ranks are not bound).
void place(const Launch& L, recipes::Plan* plan) {
  plan->placement.clear();
  auto bind = topology::parse_bind_policy(L.job.recipe.launch.binding);
  if (!bind || *bind == topology::BindPolicy::kNone) return;
  const topology::Placement p = topology::place(L.topo, L.job.shape.ranks_per_node, *bind);
  for (const topology::RankPlacement& r : p.ranks) {
    plan->placement.push_back({r.local_rank, r.cpus, r.gpu, r.nic});
  }
}

namespace {
// "" when `topo` is this machine's (discovered live, or this boot's saved discovery) or the job's
// hosts' (asked over ssh: the ranks run there); else why a measurement here is not that machine's:
// an export loaded instead (DLTUNE_TOPO_XML), whose key the ranks, running here, would store their
// figures under.
std::string other_machine(const topology::Topology& topo) {
  // A host's own (-H): the machine the job's ranks, and its tuning's, run on.
  if (topo.source == "live" || launcher::is_host_topology(topo)) return "";
  return "the topology is another machine's (DLTUNE_TOPO_XML " +
         strings::printable(topo.source, "") + ")";
}
// Why a launch on `topo` tunes nothing here ("" when it may): other_machine()'s reason.
std::string not_tuned_here(const topology::Topology& topo) {
  const std::string elsewhere = other_machine(topo);
  return elsewhere.empty() ? "" : elsewhere + ", and a tuning here would measure this machine";
}
}  // namespace

// Phase 2 for a new run: the plan from the databases or a tuning, laid out and placed.
Status choose_new(Launch& L, Progress& progress, const tuner::db::Layers& layers) {
  const LaunchOptions& o = *L.o;
  launcher::LaunchPredictor predictor(L.job.recipe, L.job.recipe_path, L.job.shape, L.cores);
  predictor.set_node_machines(L.machines);
  // A measured interference of this machine, the model and ranks per node, where one is stored
  // (`dltune predict --interference measure`).
  if (!o.dry_run && L.job.shape.ranks_per_node > 1 && other_machine(L.topo).empty())
    predictor.load_stored_interference(layers, L.topo);
  launcher::PlanRequest req;
  req.recipe = L.job.recipe;
  // A run continued on another shape: the new shape's cached plan, else a tuning of
  // tune.restart_budget (its time counts in the restart's), else the recipe's own settings.
  if (L.resumed) req.recipe.tune.budget_seconds = L.job.recipe.tune.restart_budget_seconds;
  req.recipe_path = L.job.recipe_path;
  req.job = L.job.shape;
  req.topo = L.topo;
  req.layers = layers;
  req.retune = o.retune && !L.resumed;
  req.no_tune = o.no_tune || o.dry_run;
  // Another machine's topology: a tuning here would time this machine's cores and store what
  // it found under that machine's key. The database's plan for it, else the recipe's own.
  if (const std::string why = not_tuned_here(L.topo);
      !why.empty() && (req.retune || !req.no_tune)) {
    req.retune = false;
    req.no_tune = true;
    req.no_tune_why = why + " (a launch on that machine tunes it)";
  }
  req.dry_run = o.dry_run;
  req.trial_layouts = [&L] { return trial_layouts(L); };
  req.progress = o.dry_run ? nullptr : &progress;
  if (L.resumed) {
    L.dir = L.resumed;
  } else if (!o.dry_run) {
    auto rd = launcher::create_run_dir(env::get(env::kRunsDir), L.job.recipe.name);
    if (!rd) return rd.error();
    L.dir = *rd;
    L.unless_trained.emplace(L.dir->path);
    req.work_dir = L.dir->file("tuning");
    // The recipe as run, now: the trials' ranks read it, and --resume reads it back.
    auto text = paths::read_file(L.job.recipe_path);
    if (!text) return text.error();
    DLTUNE_TRY_CTX(paths::write_file_atomic(L.dir->recipe(), *text),
                   std::string("writing the run directory"));
    L.job.recipe_path = L.dir->recipe();
    req.recipe_path = L.dir->recipe();
  }
  req.run = [&L](const std::string& phase, const std::vector<std::string>& argv) {
    return launcher::run_ranks(L.job, phase, argv);
  };
  if (req.retune || (!req.no_tune && req.recipe.tune.budget_seconds > 0))
    progress.phase("looking up the plan");
  req.predict_sps = [&predictor](const recipes::Plan& plan, const launcher::PlanChoice& so_far) {
    predictor.set_models(so_far.collective_measurements, so_far.level_fits);
    const launcher::LaunchPrediction p = predictor.predict(plan, false);
    return p.ok ? std::optional<double>(p.job.throughput_sps) : std::nullopt;
  };
  auto c = launcher::choose_plan(req);
  progress.finish();
  if (!c) return c.error();
  L.choice = std::move(*c);
  L.choice.notes.insert(L.choice.notes.begin(), L.job.notes.begin(), L.job.notes.end());
  if (L.old_plan) launcher::carry_training(*L.old_plan, &L.choice.plan, &*L.reshape);
  DLTUNE_TRY(lay_out(L, &L.choice.plan));
  place(L, &L.choice.plan);
  if (L.reshape && L.choice.plan.parallel.pipelined()) {
    L.reshape->changes.push_back("a pipeline of " + std::to_string(L.choice.plan.parallel.stages) +
                                 " stages x " + std::to_string(L.choice.plan.parallel.replicas) +
                                 " replicas");
  }
  if (L.choice.plan.parallel.stages > 1)
    L.choice.notes.push_back("layout: " + L.choice.plan.parallel.reason);
  if (o.dry_run && L.choice.source != "cache") L.choice.source = "default";
  if (!o.dry_run) {
    predictor.set_models(L.choice.collective_measurements, L.choice.level_fits);
    L.prediction = predictor.predict(L.choice.plan, true);
  }
  return ok_status();
}

// Phase 2 for a new run whose ranks and threads are both auto: the shape, measured
// (shape_search.h) before its plan is chosen. The measuring counts in the recipe's tune.budget:
// the tuning that follows has what it left.
Status choose_shape(Launch& L, Progress& progress) {
  if (!L.job.shape_auto || L.resumed) return ok_status();
  const double budget = L.job.recipe.tune.budget_seconds;
  launcher::ShapeSearch s;
  s.job = &L.job;
  s.topo = &L.topo;
  s.worker = L.worker;
  s.db_path = L.layers->user_db;
  s.work_dir = L.tmp->path();
  s.measure = !L.o->dry_run && !L.o->no_tune && budget > 0;
  s.elsewhere = other_machine(L.topo);  // a run here would time these cores under its shapes
  s.remeasure = L.o->retune;
  s.budget_s = launcher::kShapeShare * budget;
  s.progress = L.o->dry_run ? nullptr : &progress;
  launcher::ShapeChoice c = launcher::search_shape(s);
  if (!c.interrupted.empty()) return Error{ErrorKind::kInternal, c.interrupted};
  if (c.decided) {
    L.job = launcher::job_with_shape(L.job, c.chosen);
    L.job.threads_reason = c.why;
  } else if (!c.why.empty()) {
    L.job.threads_reason += "; ranks x threads: " + c.why;
  }
  L.job.recipe.tune.budget_seconds = std::max(0.0, budget - c.seconds);
  L.shape = std::move(c);
  return ok_status();
}

// Phase 2: the plan, and the run's length under it (checked against the recipe before any
// rank starts: the ranks check it again).
Status choose(Launch& L, Progress& progress) {
  auto layers = tuner::db::layers_from_env(L.o->db.empty() ? std::nullopt
                                                           : std::optional<std::string>(L.o->db));
  if (!layers) return layers.error();
  L.layers = *layers;
  if (L.resumed) {
    auto text = paths::read_file(L.resumed->plan());
    auto plan = text ? recipes::parse_plan(*text) : Result<recipes::Plan>(text.error());
    if (!plan) return plan.error().wrap(L.resumed->plan());
    if (launcher::needs_reshape(*plan, L.job.shape)) {
      DLTUNE_TRY_CTX(launcher::check_reshape(*plan, L.job.ranks), "--resume " + L.o->resume);
      L.old_plan = *plan;
      L.reshape.emplace();
      DLTUNE_TRY(choose_new(L, progress, *layers));
    } else {
      L.choice.plan = *plan;
      L.choice.source = std::string(recipes::plan_source_name(plan->provenance.source));
      L.dir = L.resumed;
    }
  } else {
    DLTUNE_TRY(choose_shape(L, progress));
    DLTUNE_TRY(choose_new(L, progress, *layers));
  }
  DLTUNE_TRY(recipes::check_plan_for_recipe(L.job.recipe, L.choice.plan, L.job.ranks));
  auto steps = recipes::training_steps(L.job.recipe, L.choice.plan.training.global_batch);
  if (!steps) return steps.error();
  L.steps = *steps;
  return ok_status();
}

int dry_run(Launch& L) {
  L.job.recipe_path = L.recipe_file;  // the private copy is gone with the dry run
  launcher::DryRun d;
  d.job = &L.job;
  d.choice = &L.choice;
  d.steps = L.steps;
  d.checkpoint_every = recipes::checkpoint_interval(L.job.recipe, L.steps);
  d.worker = L.worker;
  d.no_tune = L.o->no_tune;
  // Another machine's topology: a launch would not tune either (choose_new()).
  if (!d.no_tune) d.no_tune_why = not_tuned_here(L.topo);
  d.no_tune = d.no_tune || !d.no_tune_why.empty();
  d.json = L.o->json;
  d.cores_per_node = L.cores;
  if (L.shape) d.shape_search = launcher::shape_choice_json(*L.shape);
  if (L.resumed) d.resumed = L.resumed->path;
  if (L.reshape) {
    d.reshaped = launcher::reshape_text(launcher::reshape_json(*L.reshape));
    const double b = L.job.recipe.tune.restart_budget_seconds;
    if (L.choice.source != "cache" && b > 0 && !L.o->no_tune) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "; a launch tunes the new shape first, for up to %.0f s", b);
      d.reshaped += std::string(buf) + " (tune.restart_budget)";
    }
  }
  launcher::print_dry_run(d);
  return 0;
}

// Phase 3: what the ranks run (plan.json; recipe.yaml is there since phase 2) and how they
// were started (launch.json). A run continued on another shape keeps its plan until then as
// plan.previous.json.
Status record(const Launch& L) {
  if (L.resumed && !L.reshape) return ok_status();
  const RunDir& dir = *L.dir;
  if (L.reshape) {
    DLTUNE_TRY(paths::write_file_atomic(dir.file("plan.previous.json"),
                                        recipes::serialize_plan(*L.old_plan)));
  }
  DLTUNE_TRY(paths::write_file_atomic(dir.plan(), recipes::serialize_plan(L.choice.plan)));
  return record_launch(L);
}

Result<std::vector<std::string>> run_options_from(const LaunchOptions& o) {
  std::vector<std::string> out;
  auto exported = launcher::parse_exports(o.exports);
  if (!exported) return exported.error();
  for (const auto& [name, value] : *exported) out.insert(out.end(), {"-x", name + "=" + value});
  if (!o.map_by.empty()) {
    auto map = topology::parse_map_policy(o.map_by);
    if (!map) return std::move(map).error().wrap("--map-by");
    out.insert(out.end(), {"--map-by", o.map_by});
  }
  return out;
}

Result<std::string> bind_to_from(const LaunchOptions& o) {
  if (o.bind_to.empty() || o.bind_to == "none" || o.bind_to == "core" || o.bind_to == "numa") {
    return o.bind_to;
  }
  return invalid_input("--bind-to " + o.bind_to +
                       ": expected none, core or numa (dltune binds "
                       "a rank to whole cores, to a NUMA domain, or not at all)");
}

Status record_launch(const Launch& L) {
  const RunDir& dir = *L.dir;
  nlohmann::json lj = {{"recipe", L.job.recipe.name},
                       {"ranks", L.job.ranks},
                       {"nodes", L.job.shape.nodes},
                       {"backend", L.job.backend == launcher::Backend::kSlurm ? "slurm" : "local"},
                       {"plan_source", L.choice.source},
                       {"command", train_argv(L.worker, dir, false)}};
  if (L.job.backend == launcher::Backend::kSlurm && !L.jo.exclude.empty())
    lj["exclude"] = L.jo.exclude;
  if (!L.job.hosts.empty()) lj["hosts"] = L.job.hosts;
  // --nodes MIN-MAX: a --resume takes the range again (the shape it gets may differ: planned
  // again then, as after a restart on fewer nodes).
  if (L.job.nodes_max > 0) lj["nodes_range"] = {L.job.recipe.launch.min_nodes, L.job.nodes_max};
  return paths::write_file_atomic(dir.launch(), lj.dump(2) + "\n");
}

// Where the plan came from, in a line or three.
void announce(const Launch& L, Progress& progress) {
  const launcher::PlanChoice& choice = L.choice;
  // Long lines wrapped at whole words for a person; JSON messages stay one line.
  const size_t width = L.o->json ? std::string::npos : static_cast<size_t>(summary_width());
  if (!L.resumed) {
    for (const auto& n : choice.notes) progress.message(n);
  }
  if (L.reshape) {
    progress.message("plan: planned again for the new shape, resuming " + L.dir->path);
    const std::string what = launcher::reshape_text(launcher::reshape_json(*L.reshape));
    progress.message("  " + launcher::wrap_words(what, width - 2, 2));
  } else if (L.resumed) {
    progress.message("plan: the run directory's plan.json (resuming " + L.dir->path + ")");
  } else if (choice.source == "cache") {
    progress.message("plan: cached in " + choice.db_path +
                     " (no tuning; --retune to measure again)");
  } else if (choice.source == "tuned") {
    char buf[96];
    std::snprintf(buf, sizeof buf, "plan: tuned in %.1f s (tune.budget %.0f s) and stored in ",
                  choice.tuning_s, choice.budget_s);
    progress.message(buf + choice.db_path);
    if (!choice.budget_cut.empty()) {
      progress.message(
          "  " + launcher::wrap_words("the budget cut: " + strings::join(choice.budget_cut, "; "),
                                      width - 18, 18));
    }
    const recipes::Provenance& pv = choice.plan.provenance;
    if (!pv.reason.empty()) {
      progress.message("  " + launcher::wrap_words("why: " + pv.reason, width - 7, 7));
    }
  } else if (choice.source == "default") {
    progress.message("plan: the recipe's own settings (not tuned)");
  }
  progress.message("run directory: " + L.dir->path);
}

// The 1-rank baseline within `budget` seconds: the user database's when launch.baseline is auto
// and it holds one for this work (launcher/flow/baseline_reuse.h) and the launch is not
// --retune (which trusts nothing stored), else measured and stored there for the next launch (a
// store that fails is said, not fatal). With another machine's export (DLTUNE_TOPO_XML) the
// ranks still run here, under that machine's key: measured, neither reused nor stored.
Result<launcher::Baseline> one_rank_baseline(const Launch& L, const nlohmann::json& worker,
                                             double budget, Progress& progress) {
  const launcher::BaselineIdentity id = launcher::baseline_identity(L.topo, L.job, L.choice.plan);
  const std::string db = L.layers && other_machine(L.topo).empty() ? L.layers->user_db : "";
  if (L.job.recipe.launch.baseline == "auto" && !L.o->retune && !db.empty()) {
    auto stored = launcher::stored_baseline(db, id);
    if (stored && stored->has_value()) return **stored;
    if (!stored) {
      progress.message("the stored 1-rank baseline was not used (" + stored.error().message() +
                       "): measuring it");
    }
  }
  progress.phase("measuring 1 rank for the scaling efficiency");
  const double sps = worker.value("throughput_sps", 0.0);
  const double step_s = sps > 0 ? worker.value("global_batch", 0.0) / sps : 0.0;
  auto base =
      launcher::measure_baseline(L.job, L.worker, L.choice.plan, step_s, budget, *L.dir, &progress);
  if (base && std::isfinite(base->rel_ci) && !db.empty()) {
    if (Status s = launcher::store_baseline(db, id, *base); !s.ok())
      progress.message("the 1-rank baseline was not stored: " + s.error().message());
  }
  return base;
}

// The run's facts for the summary (launch_outcome.h), the 1-rank baseline measured or reused.
launcher::RunFacts run_facts(const Launch& L, Progress& progress, bool resumed_from_checkpoint) {
  const RunDir& dir = *L.dir;
  launcher::RunFacts facts;
  facts.recipe = L.job.recipe.name;
  facts.ranks = L.job.ranks;
  facts.nodes = L.job.shape.nodes;
  facts.backend = L.job.backend == launcher::Backend::kSlurm ? "slurm"
                  : L.job.hosts.empty()                      ? "local"
                                                             : "ssh";
  facts.cores_per_node = L.cores;
  facts.classes = L.job.recipe.data.classes;
  facts.nodes_per_machine = launcher::nodes_per_machine(L.machines, L.job.shape.nodes);
  facts.binding = L.job.recipe.launch.binding;
  facts.choice = L.choice;
  facts.prediction = L.prediction;
  facts.threads_reason = L.job.threads_reason;
  if (L.shape) facts.shape_search = launcher::shape_choice_json(*L.shape);
  auto ws = paths::read_file(dir.worker_summary());
  facts.worker =
      ws ? parse_json_bounded(*ws).value_or(nlohmann::json::object()) : nlohmann::json::object();
  if (!facts.worker.is_object()) facts.worker = nlohmann::json::object();
  facts.baseline_mode = L.job.recipe.launch.baseline;
  if (L.job.ranks > 1 && facts.baseline_mode != "off") {
    const double budget = launcher::baseline_budget_s(facts.worker.value("wall_seconds", 0.0));
    auto base = one_rank_baseline(L, facts.worker, budget, progress);
    if (base) {
      facts.baseline_sps = base->sps;
      facts.baseline_steps = base->steps;
      facts.baseline_rel_ci = base->rel_ci;
      facts.baseline_bind = base->bind;
      facts.baseline_seconds = base->seconds;
      facts.baseline_budget_s = budget;
      facts.baseline_measured_at = base->measured_at;
      facts.baseline_measured_on = base->measured_on;
    } else {
      facts.baseline_error = base.error().message();
    }
  }
  facts.gradient_bytes =
      static_cast<uint64_t>(std::max<int64_t>(tuner::gradient_bytes(L.job.recipe), 0));
  // At the size one allreduce works on, whose buffers may stay in cache: the best case, so
  // that the bound is one (at the whole gradient's size, a copy runs from memory and AlexNet's
  // 4 MiB buckets "beat" it).
  const uint64_t bucket = facts.choice.plan.training.bucket_bytes;
  facts.copy_gbs = launcher::measure_copy_gbs(
      bucket > 0 ? std::min<uint64_t>(bucket, facts.gradient_bytes) : facts.gradient_bytes);
  facts.resumed_from = resumed_from_checkpoint ? dir.checkpoint() : "";
  facts.restarts = L.restarts;
  if (L.reshape) facts.reshaped = launcher::reshape_json(*L.reshape);
  if (L.job.recipe.data.kind == recipes::DataKind::kText) {
    auto h = engine::unigram_entropy_bits(L.job.recipe.data.path);
    if (h) facts.unigram_entropy_bits = *h;
  }
  progress.finish();
  return facts;
}

// Phase 5: summary.json, report.html and the summary printed.
Status summarize(const Launch& L, Progress& progress, bool resumed_from_checkpoint) {
  launcher::RunFacts facts = run_facts(L, progress, resumed_from_checkpoint);
  facts.wall_seconds = since(L.t0);
  const RunDir& dir = *L.dir;
  const auto log = launcher::read_metrics(dir.metrics());
  const auto summary = launcher::make_summary(facts, log, dir);
  Status w = paths::write_file_atomic(dir.summary(), summary.dump(2) + "\n");
  if (w.ok()) w = launcher::write_report(facts, log, summary, dir);
  if (!w.ok()) return w.error().wrap("writing the run directory");
  if (L.o->json) {
    nlohmann::json j = summary;
    j["event"] = "summary";
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s", launcher::format_summary(summary, summary_width()).c_str());
  }
  return ok_status();
}

int run_launch(const LaunchOptions& o) {
  Launch L;
  L.o = &o;
  L.t0 = std::chrono::steady_clock::now();
  if (Status s = open_job(L); !s) return report_error("launch", s.error());
  // The slurm backend outside an allocation: the whole launch (tuning and training) runs again
  // under salloc with the job's shape, so that every phase gets the same nodes, and the spare
  // nodes (launch.spare_nodes) with their tasks.
  if (L.job.backend == launcher::Backend::kSlurm && !launcher::in_slurm_allocation() &&
      !o.dry_run) {
    const int spare = static_cast<int>(L.job.recipe.launch.spare_nodes);
    const int most = L.job.nodes_max > 0 ? L.job.nodes_max : L.job.shape.nodes;
    Status s = launcher::rerun_in_allocation(
        L.job.shape.nodes + spare, (most + spare) * L.job.shape.ranks_per_node,
        restarts_allowed(L) > 0, L.job.nodes_max > 0 ? L.job.nodes_max + spare : 0);
    return report_error("launch", s.error());  // only reached when salloc could not start
  }
  Progress progress(Progress::detect(o.json, stdout), stdout);
  // Slurm nodes may be namespaces of this one host (the test cluster), whose ranks then share
  // its cores: asked once (a short srun step), for the warning and every prediction.
  if (!o.dry_run) {
    L.machines = launcher::ask_node_machines(L.job.backend == launcher::Backend::kSlurm,
                                             L.job.shape.nodes, L.job.hosts);
    const int npm = launcher::nodes_per_machine(L.machines, L.job.shape.nodes);
    const std::string w = launcher::oversubscription_warning(L.job, L.cores, npm);
    if (!w.empty()) progress.message(w);
  }
  if (Status s = choose(L, progress); !s) {
    // Interrupted while it measured shapes or tuned: 130 / 143, as an interrupted training.
    const int code = report_error("launch", s.error());
    return forwarded_signal() != 0 ? 128 + forwarded_signal() : code;
  }
  if (o.dry_run) return dry_run(L);
  if (Status s = record(L); !s)
    return report_error("launch", s.error().wrap("writing the run directory"));
  announce(L, progress);
  if (L.unless_trained) L.unless_trained->keep();
  bool resumed_from_checkpoint = false;
  if (int code = train(L, progress, &resumed_from_checkpoint); code != 0) return code;
  if (Status s = summarize(L, progress, resumed_from_checkpoint); !s)
    return report_error("launch", s.error());
  return 0;
}

}  // namespace launch_phases

void setup_launch(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<launch_phases::LaunchOptions>();
  auto* cmd = app.add_subcommand(
      "launch",
      "Train a recipe: plan from the tuning database (or tune and store), launch the ranks, "
      "show progress, write a run directory with summary and report");
  cmd->add_option("RECIPE", o->job.recipe,
                  "Recipe file or bundled recipe name (dltune recipe list)");
  cmd->add_option("-n,--np,--ranks", o->job.ranks, "Ranks (default: the recipe's, else auto)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option_function<std::string>(
         "--nodes",
         [o](const std::string& v) {
           auto n = launcher::parse_node_count(v);
           if (!n) throw CLI::ValidationError("--nodes", n.error().message());
           o->job.nodes = n->first;
           o->job.nodes_max = n->second;
         },
         "Nodes (slurm backend; default: the allocation's; outside one, an allocation of this "
         "many is obtained with salloc). MIN-MAX: as many as the allocation has up to MAX; a "
         "lost node is replaced by growing the allocation, else the job goes on down to MIN")
      ->type_name("N|MIN-MAX");
  cmd->add_option("--backend", o->job.backend,
                  "local or slurm (default: slurm inside an allocation, else local)");
  cmd->add_option("-H,--host", o->hosts,
                  "HOST[:SLOTS],...: the job's nodes are these machines, its ranks started over "
                  "ssh as `dltune run -H` starts them (ranks: -n, the recipe's, else every "
                  "host's slots when equal, else the rule per node from this machine's cores)");
  cmd->add_option("--hostfile", o->hostfile, "FILE of hosts (HOST [slots=N] per line), as -H");
  cmd->add_option("-x", o->exports,
                  "NAME=VALUE: set NAME in every rank the launch starts (its trials and the "
                  "training); NAME: this command's NAME (mpirun's -x; repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--bind-to", o->bind_to,
                  "none, core or numa: the ranks' binding (mpirun's words; sets launch.binding)");
  cmd->add_option("--map-by", o->map_by,
                  "core, slot, numa or socket: how a node's ranks are dealt over its NUMA "
                  "domains, as `dltune run --map-by` (the plan's placement yields to it)");
  cmd->add_flag("--retune", o->retune, "Tune again even when a plan is cached");
  cmd->add_flag("--no-tune", o->no_tune, "Never tune: the cached plan, else the recipe's settings");
  cmd->add_option("--db", o->db, "User tuning database (default DLTUNE_DB, else XDG data)");
  cmd->add_option("--resume", o->resume, "Continue the run in RUN_DIR from its last checkpoint");
  cmd->add_option("--max-restarts", o->max_restarts,
                  "When the ranks fail, continue from the last checkpoint on the same ranks up "
                  "to N times (default: the recipe's launch.restarts, else 0)")
      ->check(CLI::Range(0, static_cast<int>(recipes::kMaxRestarts)));
  cmd->add_flag("--dry-run", o->dry_run, "Print the plan and the exact launch; start nothing");
  cmd->add_flag("--json", o->json,
                "JSON events on standard output, one per line (errors too: {\"event\":\"error\"})");
  cmd->add_flag("--tag-output", o->tag_output,
                "A program recipe: prefix every line of the program's output with [rank]");
  cmd->add_flag("--timestamp-output", o->timestamp_output,
                "A program recipe: start every line of the program's output with its time");
  cmd->add_option("--set", o->sets,
                  "Change a recipe key, checked as the file's are: --set training.steps=10 "
                  "--set data.path=/data/cifar (any key; repeatable; recorded in the run "
                  "directory's recipe.yaml)");
  cmd->footer(
      "The run directory is created under DLTUNE_RUNS_DIR (default ./runs).\n"
      "Exit status: 0 success; a failed training exits as mpirun (and dltune run) do: the "
      "failed rank's exit code, 128 + its signal, or its MPI_Abort code; 1 for other failures; 2 "
      "bad input; 130/143 interrupted.\n"
      "--backend slurm outside an allocation runs the whole launch again under salloc with the "
      "job's nodes and ranks.");
  cmd->callback([o, exit_code] {
    if (o->job.recipe.empty() && o->resume.empty()) {
      *exit_code = report_error("launch", invalid_input("give a RECIPE (or --resume RUN_DIR)"));
      return;
    }
    if (!o->job.recipe.empty() && launch_phases::is_program_recipe(o->job.recipe)) {
      *exit_code = launch_phases::run_program_launch(*o);
      return;
    }
    if (o->tag_output || o->timestamp_output) {
      *exit_code = report_error(
          "launch", invalid_input("--tag-output and --timestamp-output are for program recipes' "
                                  "output; a model recipe's ranks report through the progress "
                                  "display and RUN_DIR/metrics.jsonl"));
      return;
    }
    *exit_code = launch_phases::run_launch(*o);
  });
}

}  // namespace dltune::cli
