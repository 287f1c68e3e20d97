// What a rank trains (`dltune-worker train`): the recipe as run and the Plan its job was given
// (DESIGN.md: the Plan is the one format from the tuner to the ranks), mapped here, on the rank,
// to the engine's configuration by train_config_from() — the mapping the tuner's trials use.
//
// Where each comes from, first match wins:
//   recipe: --recipe FILE|NAME (with --set KEY=VALUE changes, as `dltune launch` takes them),
//           else the job's recipe (PMIx job data, else the file DLTUNE_RECIPE names);
//   plan:   --plan FILE, else the job's plan (PMIx job data, else the file DLTUNE_PLAN names),
//           else the recipe's own settings for the job's shape (recipes::recipe_default_plan).
// What is not a tuned choice comes from the recipe (the checkpoint interval) or the run
// directory's fixed layout (common/run_layout.h): --run-dir DIR puts the metrics, checkpoint,
// trace and rank 0's summary there.
#pragma once

#include <string>
#include <vector>

#include "comm/bootstrap/bootstrap.h"
#include "common/result.h"
#include "engine/train/train_config.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::engine {

struct RankJobOptions {
  std::string recipe;             // --recipe: a file or a bundled recipe's name ("" = the job's)
  std::vector<std::string> sets;  // --set KEY=VALUE, applied to --recipe's file
  std::string plan;               // --plan: a Plan file ("" = the job's, else the recipe's own)
  std::string run_dir;            // --run-dir: the run directory whose fixed layout it writes
  std::string metrics, checkpoint, summary;  // explicit paths, over the run directory's
};

struct RankJob {
  recipes::Recipe recipe;
  recipes::Plan plan;
  std::string plan_source;  // "plan file P", "the job's plan", "the recipe's own settings"
  TrainConfig config;
  std::string summary_path;  // where rank 0 writes its summary ("" = standard output)
};

// Loads the recipe and plan as above for a job of `ranks` ranks on `nodes` nodes (`boot`: the
// job's bootstrap, null when started by hand), checks that the plan was made for that shape
// and can run the recipe (recipes::check_plan_for_recipe), and maps them. Errors: no recipe
// anywhere (invalid_input, saying how to give one); a recipe or plan that does not parse or
// validate (invalid_input, naming where it came from); a plan for another job shape
// (invalid_input: "the plan is for a 1x2 job, this one is 1x4"); unreadable files (io).
Result<RankJob> load_rank_job(const RankJobOptions& options, const comm::Bootstrap* boot, int ranks,
                              int nodes);

}  // namespace dltune::engine
