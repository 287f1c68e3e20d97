// What the phases of `dltune launch` share: its options and the state they fill in, and the
// phases that live in files of their own. launcher/cli/cmd_launch.cc runs the phases in order
// (its opening comment lists them); launcher/cli/launch_train.cc is the training phase with its
// restarts (on the same ranks, on fewer, without a lost node).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/progress.h"
#include "common/result.h"
#include "launcher/backend/temp_dir.h"
#include "launcher/flow/launch_job.h"
#include "launcher/flow/launch_plan.h"
#include "launcher/flow/launch_prediction.h"
#include "launcher/flow/reshape.h"
#include "launcher/flow/restarts.h"
#include "launcher/flow/run_dir.h"
#include "launcher/flow/shape_search.h"
#include "topology/topology.h"
#include "tuner/db/lookup.h"

namespace dltune::cli::launch_phases {

using launcher::RunDir;

struct LaunchOptions {
  launcher::JobOptions job;
  bool retune = false, no_tune = false, dry_run = false, json = false;
  int max_restarts = -1;  // --max-restarts; -1: the recipe's launch.restarts
  std::string db, resume;
  std::vector<std::string> sets;     // --set KEY=VALUE, as given
  std::string hosts, hostfile;       // -H HOST[:SLOTS],... / --hostfile FILE, as given
  std::vector<std::string> exports;  // -x NAME[=VALUE], as given
  std::string bind_to, map_by;       // mpirun's --bind-to / --map-by, as given
  // A program recipe's ranks' output: each line prefixed with its rank / its arrival time.
  bool tag_output = false, timestamp_output = false;
  // `dltune tune` of a program recipe: tune (or find the cached plan) and stop; `grid`: every
  // candidate measured alike; budget_s > 0 replaces tune.budget.
  bool tune_only = false, grid = false;
  double budget_s = 0;
};

// What the phases share.
struct Launch {
  const LaunchOptions* o = nullptr;
  std::chrono::steady_clock::time_point t0;
  topology::Topology topo;
  std::string worker;  // dltune-worker
  int cores = 0;       // this node's
  launcher::JobOptions jo;
  launcher::Job job;
  std::string recipe_file;               // the recipe as the user named it
  std::optional<launcher::TempDir> tmp;  // the recipe as run before the run directory holds it
  std::optional<RunDir> resumed;         // --resume's run directory
  // --resume on another shape (launcher/flow/reshape.h): the run's plan until now, and what
  // changed.
  std::optional<recipes::Plan> old_plan;
  std::optional<launcher::Reshape> reshape;
  std::optional<RunDir> dir;                            // the run directory
  std::optional<launcher::RunDirGuard> unless_trained;  // a refused launch leaves no run dir
  launcher::NodeMachines machines;
  std::optional<tuner::db::Layers> layers;  // the databases, as choose() found them
  // The ranks x threads search of a job that left both auto (shape_search.h); nullopt when the
  // job did not leave them auto or was resumed.
  std::optional<launcher::ShapeChoice> shape;
  launcher::PlanChoice choice;
  launcher::LaunchPrediction prediction;
  int64_t steps = 0;  // the run's length (recipes::training_steps at the plan's batch)
  std::vector<launcher::Restart> restarts;  // the training's, in order (launcher/flow/restarts.h)
};

// Seconds since `t0`.
double since(std::chrono::steady_clock::time_point t0);

// Phase 2 for a job without a plan of its own (not --resume on its shape): the databases' plan
// for the job's shape, else a tuning's within the recipe's budget (tune.restart_budget when the
// run is resumed), else the recipe's own settings; laid over the ranks and placed. Fills
// L.choice, L.prediction and L.steps (cmd_launch.cc).
Status choose_new(Launch& L, Progress& progress, const tuner::db::Layers& layers);

// Phase 3: writes the run directory's plan.json, recipe.yaml and launch.json (cmd_launch.cc).
Status record(const Launch& L);
// launch.json alone: the job's ranks, nodes, backend, plan source and command, and under Slurm
// the nodes the job lost ("exclude": `--resume` leaves them out again where its allocation has
// them). Written again whenever a node is found lost, whether or not the job continues.
Status record_launch(const Launch& L);

// mpirun's words a launch passes to every `dltune run` it starts: {"-x", "NAME=VALUE"} for each
// -x (a bare NAME takes this process's value), {"--map-by", WORD}. Errors: what
// launcher::parse_exports and topology::parse_map_policy say.
Result<std::vector<std::string>> run_options_from(const LaunchOptions& o);
// --bind-to's policy ("" when not given). Errors: a word other than none, core or numa.
Result<std::string> bind_to_from(const LaunchOptions& o);

// The ranks' command for a training run of `dir` (`resume`: from its checkpoint): the plan and
// recipe reach them as the job's (run_ranks), everything else from the run directory's fixed
// layout.
std::vector<std::string> train_argv(const std::string& worker, const RunDir& dir, bool resume);

// How many times the job may restart: --max-restarts, else the recipe's launch.restarts.
int restarts_allowed(const Launch& L);

// Phase 4: the ranks, following rank 0's metrics; a failed job continues from the run's last
// checkpoint by itself up to launch.restarts times (launch_train.cc). Returns the exit code (0:
// trained); `resumed_from_checkpoint` says whether the first attempt loaded a checkpoint.
int train(Launch& L, Progress& progress, bool* resumed_from_checkpoint);

}  // namespace dltune::cli::launch_phases
