// `dltune launch --dry-run`: what a launch would do, printed, with nothing started or written:
// the recipe (and its --set overrides), the machine and the ranks, where the plan would come
// from (cached; or tuned first: within which budget, over which collective sizes and how many
// candidates; or the recipe's own settings with --no-tune; or, resuming, the run directory's
// plan, or the plan made again for a new shape), the plan in words, and the exact
// command the ranks would run. --json: one {"event":"dry_run"} object with the same facts: the
// plan as the ranks would get it, the run's steps and checkpoint interval.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "launcher/flow/launch_job.h"
#include "launcher/flow/launch_plan.h"
#include "launcher/flow/plan_words.h"

namespace dltune::launcher {

struct DryRun {
  const Job* job = nullptr;
  const PlanChoice* choice = nullptr;
  int64_t steps = 0;             // the run's length under the plan (recipes::training_steps)
  int64_t checkpoint_every = 0;  // recipes::checkpoint_interval
  std::string worker;            // the rank program's path
  bool no_tune = false;          // --no-tune was given, or a launch would not tune (below)
  std::string no_tune_why;       // why a launch would not tune ("": --no-tune)
  bool json = false;
  int cores_per_node = 0;       // of this machine (0 = unknown)
  std::string resumed;          // --resume: the run directory the launch continues ("" a new run)
  std::string reshaped;         // --resume on another shape: launcher/flow/reshape.h reshape_text()
  nlohmann::json shape_search;  // the ranks x threads search (shape_search.h), else null
};

void print_dry_run(const DryRun& d);

// "warning: 4 ranks per node on 2 cores: ..." when the job has more ranks per node than this
// machine has cores; "" otherwise. With `nodes_per_machine` > 1 (Slurm nodes that are one
// host's namespaces, launch_prediction.h's NodeMachines) the ranks of that many nodes share
// the cores: "warning: 4 ranks per machine (2 nodes each) on 2 cores: ...".
std::string oversubscription_warning(const Job& job, int cores_per_node, int nodes_per_machine = 1);

}  // namespace dltune::launcher
