// `dltune launch RECIPE [-n RANKS] [--nodes N] [--backend local|slurm] [--retune|--no-tune]
//  [--db PATH] [--resume RUN_DIR] [--dry-run] [--json] [--set KEY=VALUE]...`: DESIGN.md's main
// flow. Validate (with the --set overrides) -> topology and placement -> plan (database, else
// tune within the budget and store) -> launch the ranks with the plan -> progress -> summary,
// everything written to a run directory (run_dir.h). Every phase shows its progress
// (launch_progress.h): the sweep, the trials, the ranks' start-up, training, the baseline.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/env.h"
#include "common/json_input.h"
#include "common/paths.h"
#include "common/progress.h"
#include "common/strings.h"
#include "engine/data/dataset.h"
#include "engine/train/recipe_config.h"
#include "engine/train/trace.h"
#include "launcher/commands.h"
#include "launcher/launch_dry_run.h"
#include "launcher/launch_job.h"
#include "launcher/launch_layout.h"
#include "launcher/launch_outcome.h"
#include "launcher/launch_plan.h"
#include "launcher/launch_prediction.h"
#include "launcher/rank_program.h"
#include "launcher/run_dir.h"
#include "launcher/slurm_backend.h"
#include "launcher/temp_dir.h"
#include "tuner/recipe_tuning.h"

namespace dltune::cli {
namespace {

using launcher::RunDir;

struct LaunchOptions {
  launcher::JobOptions job;
  bool retune = false, no_tune = false, dry_run = false, json = false;
  std::string db, resume;
  std::vector<std::string> sets;  // --set KEY=VALUE, as given
};

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

// The ranks' command for a training run of `dir` (their plan, dir.train_config(), reaches them
// as the job's plan: launch_prefix(job, dir.train_config())).
std::vector<std::string> train_argv(const std::string& worker, const RunDir& dir, bool resume) {
  std::vector<std::string> argv = {worker, "train", "--summary", dir.file("worker_summary.json")};
  if (resume) {
    argv.push_back("--resume");
    argv.push_back(dir.checkpoint());
  }
  return argv;
}

// recipe.yaml: a byte copy of the recipe as run: the recipe file, or with --set the document
// with the overrides applied and the comment that names them (recipes/recipe_overrides.h),
// which job.recipe_path then names.
Status write_recipe_as_run(const launcher::Job& job, const RunDir& dir) {
  auto text = paths::read_file(job.recipe_path);
  if (!text) return text.error();
  return paths::write_file_atomic(dir.recipe(), *text);
}

int run_launch(const LaunchOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.retune && o.no_tune) {
    return report_error("launch", invalid_input("--retune and --no-tune exclude each other"));
  }
  if (!o.resume.empty() && !o.sets.empty()) {
    return report_error("launch", invalid_input("--set changes a recipe, and a resumed run "
                                                "continues its own (the run directory's "
                                                "recipe.yaml); leave out --set or --resume"));
  }
  launcher::JobOptions jo = o.job;
  for (const std::string& text : o.sets) {
    auto ov = recipes::parse_override(text);
    if (!ov) return report_error("launch", ov.error());
    jo.overrides.push_back(*ov);
  }
  auto topo = topology::discover_default();
  if (!topo) return report_error("launch", topo.error().wrap("discovering this machine"));
  auto worker = sibling_program("dltune-worker");
  if (!worker) return report_error("launch", worker.error());
  const int cores = static_cast<int>(topo->cores.size());

  // 1. The job: a new one from the recipe, or the one a run directory holds.
  std::optional<RunDir> resumed;
  if (!o.resume.empty()) {
    auto rd = launcher::open_run_dir(o.resume);
    if (!rd) return report_error("launch", rd.error());
    resumed = *rd;
    auto launch_text = paths::read_file(rd->launch());
    auto lj = launch_text ? parse_json_bounded(*launch_text).value_or(nlohmann::json())
                          : nlohmann::json();
    if (!lj.is_object()) {
      return report_error("launch", invalid_input("--resume " + o.resume + ": " + rd->launch() +
                                                  " is missing or not JSON"));
    }
    // launch.json is read back from a directory anyone may have edited: a field of the wrong
    // type is an error that names it, never an exception.
    for (const char* k : {"recipe_path", "backend"}) {
      if (lj.contains(k) && !lj[k].is_string()) {
        return report_error("launch", invalid_input("--resume " + o.resume + ": " + rd->launch() +
                                                    ": '" + k + "' must be a string"));
      }
    }
    for (const char* k : {"ranks", "nodes"}) {
      if (lj.contains(k) && !(lj[k].is_number_integer() && lj[k].get<int64_t>() >= 0 &&
                              lj[k].get<int64_t>() <= (int64_t{1} << 20))) {
        return report_error("launch",
                            invalid_input("--resume " + o.resume + ": " + rd->launch() + ": '" + k +
                                          "' must be a whole number from 0 to 1048576"));
      }
    }
    jo.recipe = lj.value("recipe_path", rd->recipe());
    if (jo.ranks == 0) jo.ranks = lj.value("ranks", 0);
    if (jo.nodes == 0) jo.nodes = lj.value("nodes", 0);
    if (jo.backend.empty()) jo.backend = lj.value("backend", "");
  }
  auto job = launcher::make_job(jo, *topo);
  if (!job) return report_error("launch", job.error());
  // With --set, the programs that read the recipe (the layout query, the dry run's ranks) read
  // it as run: the overrides applied, in a private file until the run directory holds it.
  std::optional<launcher::TempDir> as_run;
  if (!jo.overrides.empty()) {
    auto t = launcher::TempDir::create_in_tmp("dltune-recipe-");
    if (!t) return report_error("launch", t.error());
    as_run = std::move(*t);
    auto text = recipes::recipe_yaml_as_run(job->recipe_path, job->recipe, jo.overrides);
    if (!text) return report_error("launch", text.error());
    const std::string path = as_run->path() + "/recipe.yaml";
    if (Status w = paths::write_file_atomic(path, *text); !w.ok()) {
      return report_error("launch", w.error());
    }
    job->recipe_path = path;
  }
  const std::string recipe_file = job->recipe.source_path;  // as the user named it
  // The slurm backend outside an allocation: the whole launch (tuning and training) runs again
  // under salloc with the job's shape, so that every phase gets the same nodes.
  if (job->backend == launcher::Backend::kSlurm && !launcher::in_slurm_allocation() && !o.dry_run) {
    Status s = launcher::rerun_in_allocation(job->shape.nodes, job->ranks);
    return report_error("launch", s.error());  // only reached when salloc could not start
  }

  Progress progress(Progress::detect(o.json, stdout), stdout);
  // Slurm nodes may be namespaces of this one host (the test cluster), whose ranks then share
  // its cores: asked once (a short srun step), for the warning and every prediction.
  launcher::NodeMachines machines;
  if (!o.dry_run) {
    machines =
        launcher::ask_node_machines(job->backend == launcher::Backend::kSlurm, job->shape.nodes);
    const int npm = launcher::nodes_per_machine(machines, job->shape.nodes);
    const std::string w = launcher::oversubscription_warning(*job, cores, npm);
    if (!w.empty()) progress.message(w);
  }
  auto layers =
      tuner::db::layers_from_env(o.db.empty() ? std::nullopt : std::optional<std::string>(o.db));
  if (!layers) return report_error("launch", layers.error());

  // 2-3. The plan.
  launcher::PlanChoice choice;
  launcher::LaunchPredictor predictor(job->recipe, job->recipe_path, job->shape,
                                      static_cast<int>(topo->cores.size()));
  predictor.set_node_machines(machines);
  std::optional<RunDir> dir = resumed;
  std::optional<launcher::TempDir> scratch;
  std::optional<launcher::RunDirGuard> unless_trained;  // a refused launch leaves no run dir
  if (resumed) {
    auto text = paths::read_file(resumed->plan());
    auto plan = text ? recipes::parse_plan(*text) : Result<recipes::Plan>(text.error());
    if (!plan) return report_error("launch", plan.error().wrap(resumed->plan()));
    choice.plan = *plan;
    choice.source = std::string(recipes::plan_source_name(plan->provenance.source));
  } else {
    launcher::PlanRequest req;
    req.recipe = job->recipe;
    req.recipe_path = job->recipe_path;
    req.job = job->shape;
    req.topo = *topo;
    req.layers = *layers;
    req.retune = o.retune;
    req.no_tune = o.no_tune || o.dry_run;
    req.dry_run = o.dry_run;
    // The recipe tuner's trials measure the promising pipeline layouts of the memory model
    // beside data parallelism (only the layouts when data parallelism does not fit), at the
    // trials' reference batch; asked only when the trials run.
    req.trial_layouts = [&]() -> Result<launcher::TrialLayouts> {
      launcher::LayoutQuery lq;
      lq.worker = *worker;
      lq.recipe_path = job->recipe_path;
      lq.ranks = job->ranks;
      lq.ranks_per_node = job->shape.ranks_per_node;
      const tuner::LayoutBatch b = tuner::layout_reference_batch(job->recipe, job->ranks);
      lq.batch = b.samples;
      lq.per_replica = b.per_replica;
      lq.measure = launcher::LayoutQuery::Measure::kForTrials;
      auto layouts = launcher::query_layouts(lq);
      if (!layouts) return std::move(layouts).error();
      return launcher::tuning_layouts(*layouts);
    };
    req.progress = o.dry_run ? nullptr : &progress;
    if (!o.dry_run) {
      auto rd = launcher::create_run_dir(env::get(env::kRunsDir), job->recipe.name);
      if (!rd) return report_error("launch", rd.error());
      dir = *rd;
      unless_trained.emplace(dir->path);
      req.work_dir = dir->file("tuning");
      // The recipe as run, now: with --set, the trials' ranks read this file (with the
      // overrides and absolute data paths), and --resume reads it back.
      Status w = write_recipe_as_run(*job, *dir);
      if (!w.ok()) return report_error("launch", w.error().wrap("writing the run directory"));
      if (!jo.overrides.empty()) {
        job->recipe_path = dir->recipe();
        req.recipe_path = dir->recipe();
      }
    }
    req.run = [&](const std::string& phase, const std::vector<std::string>& argv) {
      return launcher::run_ranks(*job, phase, argv);
    };
    if (req.retune || (!req.no_tune && job->recipe.tune.budget_seconds > 0)) {
      progress.phase("looking up the plan");
    }
    req.predict_sps = [&](const recipes::Plan& plan, const launcher::PlanChoice& so_far) {
      predictor.set_models(so_far.collective_measurements, so_far.level_fits);
      const launcher::LaunchPrediction p = predictor.predict(plan, false);
      return p.ok ? std::optional<double>(p.job.throughput_sps) : std::nullopt;
    };
    auto c = launcher::choose_plan(req);
    progress.finish();
    if (!c) return report_error("launch", c.error());
    choice = std::move(*c);
    // The layout: the memory model's choice for this plan's batch (a layout that does not fit
    // is refused here, saying by how much and what would fit).
    launcher::LayoutQuery lq;
    lq.worker = *worker;
    lq.recipe_path = job->recipe_path;
    lq.ranks = job->ranks;
    lq.ranks_per_node = job->shape.ranks_per_node;
    // A dry run starts nothing: FLOPs.
    lq.measure = o.dry_run ? launcher::LayoutQuery::Measure::kNever
                           : launcher::LayoutQuery::Measure::kForChoice;
    if (Status st = launcher::apply_layout(lq, &choice.plan); !st)
      return report_error("launch", st.error());
    if (choice.plan.parallel.stages > 1)
      choice.notes.push_back("layout: " + choice.plan.parallel.reason);
    if (!o.dry_run) {  // the dry run prints them itself
      for (const auto& n : choice.notes) progress.message(n);
    }
    if (o.dry_run && choice.source != "cache") choice.source = "default";
  }

  // The TrainConfig the ranks run.
  engine::TrainConfig cfg;
  if (resumed) {
    auto text = paths::read_file(resumed->train_config());
    auto parsed =
        text ? engine::parse_train_config(*text) : Result<engine::TrainConfig>(text.error());
    if (!parsed) return report_error("launch", parsed.error().wrap(resumed->train_config()));
    cfg = *parsed;
  } else {
    auto c = engine::train_config_from(job->recipe, choice.plan, job->ranks);
    if (!c) return report_error("launch", c.error());
    cfg = *c;
  }
  if (o.dry_run) {
    job->recipe_path = recipe_file;  // the private copy is gone with the dry run
    launcher::DryRun d;
    d.job = &*job;
    d.choice = &choice;
    d.config = &cfg;
    d.worker = *worker;
    d.no_tune = o.no_tune;
    d.json = o.json;
    d.cores_per_node = cores;
    launcher::print_dry_run(d);
    return 0;
  }
  // What the models predict, before the ranks measure it (the summary sets them side by side).
  launcher::LaunchPrediction prediction;
  if (!resumed) {
    predictor.set_models(choice.collective_measurements, choice.level_fits);
    prediction = predictor.predict(choice.plan, true);
  }
  if (!resumed) {
    cfg.metrics_path = dir->metrics();
    cfg.checkpoint_path = dir->checkpoint();
    cfg.trace_path = dir->trace();
    if (cfg.checkpoint_every <= 0) cfg.checkpoint_every = std::max<int64_t>(1, cfg.steps / 4);
    Status w = paths::write_file_atomic(dir->plan(), recipes::serialize_plan(choice.plan));
    if (w.ok()) w = paths::write_file_atomic(dir->train_config(), engine::to_json(cfg));
    const nlohmann::json lj = {
        {"recipe", job->recipe.name},
        {"recipe_path", job->recipe_path},
        {"ranks", job->ranks},
        {"nodes", job->shape.nodes},
        {"backend", job->backend == launcher::Backend::kSlurm ? "slurm" : "local"},
        {"plan_source", choice.source},
        {"command", train_argv(*worker, *dir, false)}};
    if (w.ok()) w = paths::write_file_atomic(dir->launch(), lj.dump(2) + "\n");
    if (!w.ok()) return report_error("launch", w.error().wrap("writing the run directory"));
  }
  // Long lines wrapped at whole words for a person; JSON messages stay one line.
  const size_t width = o.json ? std::string::npos : static_cast<size_t>(summary_width());
  if (resumed) {
    progress.message("plan: the run directory's plan.json (resuming " + dir->path + ")");
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
  progress.message("run directory: " + dir->path);
  if (unless_trained) unless_trained->keep();

  // 4. Train, following rank 0's metrics.
  const bool resume_ckpt = resumed && paths::exists(dir->checkpoint());
  if (resumed && !resume_ckpt)
    progress.message("no checkpoint yet in " + dir->path + "; starting over");
  progress.phase(resume_ckpt ? "training (resumed)" : "training");
  progress.status("starting " + std::to_string(job->ranks) + " rank(s)");
  int code = 0;
  Status trained;
  {
    launcher::MetricsFollower follow(cfg.metrics_path, static_cast<long>(cfg.steps), &progress);
    trained = launcher::run_ranks(*job, "training", train_argv(*worker, *dir, resume_ckpt), &code,
                                  dir->train_config());
  }
  progress.finish();
  if (!trained.ok()) {
    std::fprintf(stderr, "dltune launch: %s\n", trained.error().message().c_str());
    if (paths::exists(dir->checkpoint())) {
      std::fprintf(stderr,
                   "dltune launch: the last checkpoint is kept; continue with: dltune "
                   "launch --resume %s\n",
                   dir->path.c_str());
    }
    return code != 0 ? code : 1;
  }
  if (Status m = engine::merge_traces(cfg.trace_path, job->ranks); !m.ok()) {
    std::fprintf(stderr, "dltune launch: no trace.json: %s\n", m.error().message().c_str());
  }

  // 5. The summary.
  launcher::RunFacts facts;
  facts.recipe = job->recipe.name;
  facts.ranks = job->ranks;
  facts.nodes = job->shape.nodes;
  facts.backend = job->backend == launcher::Backend::kSlurm ? "slurm" : "local";
  facts.cores_per_node = cores;
  facts.nodes_per_machine = launcher::nodes_per_machine(machines, job->shape.nodes);
  facts.binding = job->recipe.launch.binding;
  facts.choice = choice;
  facts.prediction = prediction;
  auto ws = paths::read_file(dir->file("worker_summary.json"));
  facts.worker =
      ws ? parse_json_bounded(*ws).value_or(nlohmann::json::object()) : nlohmann::json::object();
  if (!facts.worker.is_object()) facts.worker = nlohmann::json::object();
  if (job->ranks > 1) {
    progress.phase("measuring 1 rank for the scaling efficiency");
    const double sps = facts.worker.value("throughput_sps", 0.0);
    const double step_s = sps > 0 ? facts.worker.value("global_batch", 0.0) / sps : 0.0;
    auto base = launcher::measure_baseline(*job, *worker, cfg, step_s, *dir, &progress);
    if (base) {
      facts.baseline_sps = base->sps;
      facts.baseline_steps = base->steps;
      facts.baseline_rel_ci = base->rel_ci;
      facts.baseline_bind = base->bind;
    } else {
      facts.baseline_error = base.error().message();
    }
  }
  facts.gradient_bytes =
      static_cast<uint64_t>(std::max<int64_t>(tuner::gradient_bytes(job->recipe), 0));
  // At the size one allreduce works on, whose buffers may stay in cache: the best case, so
  // that the bound is one (at the whole gradient's size, a copy runs from memory and AlexNet's
  // 4 MiB buckets "beat" it).
  const uint64_t bucket = facts.choice.plan.training.bucket_bytes;
  facts.copy_gbs = launcher::measure_copy_gbs(
      bucket > 0 ? std::min<uint64_t>(bucket, facts.gradient_bytes) : facts.gradient_bytes);
  facts.resumed_from = resume_ckpt ? dir->checkpoint() : "";
  if (job->recipe.data.kind == recipes::DataKind::kText) {
    auto h = engine::unigram_entropy_bits(job->recipe.data.path);
    if (h) facts.unigram_entropy_bits = *h;
  }
  progress.finish();
  facts.wall_seconds = since(t0);
  const auto log = launcher::read_metrics(dir->metrics());
  const auto summary = launcher::make_summary(facts, log, *dir);
  Status w = paths::write_file_atomic(dir->summary(), summary.dump(2) + "\n");
  if (w.ok()) w = launcher::write_report(facts, log, summary, *dir);
  if (!w.ok()) return report_error("launch", w.error().wrap("writing the run directory"));
  if (o.json) {
    nlohmann::json j = summary;
    j["event"] = "summary";
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s", launcher::format_summary(summary, summary_width()).c_str());
  }
  return 0;
}

}  // namespace

void setup_launch(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<LaunchOptions>();
  auto* cmd = app.add_subcommand(
      "launch",
      "Train a recipe: plan from the tuning database (or tune and store), launch the ranks, "
      "show progress, write a run directory with summary and report");
  cmd->add_option("RECIPE", o->job.recipe,
                  "Recipe file or bundled recipe name (dltune recipe list)");
  cmd->add_option("-n,--ranks", o->job.ranks, "Ranks (default: the recipe's, else auto)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--nodes", o->job.nodes,
                  "Nodes (slurm backend; default: the allocation's; outside one, an allocation "
                  "of this many is obtained with salloc)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--backend", o->job.backend,
                  "local or slurm (default: slurm inside an allocation, else local)");
  cmd->add_flag("--retune", o->retune, "Tune again even when a plan is cached");
  cmd->add_flag("--no-tune", o->no_tune, "Never tune: the cached plan, else the recipe's settings");
  cmd->add_option("--db", o->db, "User tuning database (default DLTUNE_DB, else XDG data)");
  cmd->add_option("--resume", o->resume, "Continue the run in RUN_DIR from its last checkpoint");
  cmd->add_flag("--dry-run", o->dry_run, "Print the plan and the exact launch; start nothing");
  cmd->add_flag("--json", o->json,
                "JSON events on standard output, one per line (errors too: {\"event\":\"error\"})");
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
  cmd->callback([o, exit_code, cmd] {
    if (o->job.recipe.empty() && o->resume.empty()) {
      *exit_code = report_error("launch", invalid_input("give a RECIPE (or --resume RUN_DIR)"));
      return;
    }
    (void)cmd;
    *exit_code = run_launch(*o);
  });
}

}  // namespace dltune::cli
