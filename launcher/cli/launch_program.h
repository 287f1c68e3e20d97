// `dltune launch` of a program recipe (issue 39; recipes/program.h): the user's own training
// program tuned and run as the engine's recipes are. launch_program.cc holds the flow.
#pragma once

#include <string>

#include "launcher/cli/launch_state.h"

namespace dltune::cli::launch_phases {

// Whether RECIPE (a path or a bundled recipe's name) is a program recipe: a readable file
// whose text has a top-level `program` key. False when it cannot be read (the model recipe
// path then reports that).
bool is_program_recipe(const std::string& recipe);

// The launch of a program recipe, as phases:
//   open      the recipe (-n fixing launch.ranks), this machine's cores and NUMA domains;
//   choose    the plan: the databases' for (this machine, the program's identity, the job
//             shape), else a tuning of the recipe's search space within tune.budget (each
//             trial a run of the program: tuner/program_tuning.h), stored with its trials,
//             else (--no-tune, budget 0) the search's first values; --dry-run prints it and
//             the exact command and stops;
//   record    the run directory: plan.json, recipe.yaml (as run), launch.json;
//   run       the program with the plan's values and the collective rules cached for its
//             shape, its output passed through (RUN_DIR/output/1/rank.N/ as well), started
//             again up to launch.restarts (--max-restarts) times when it fails;
//   summarize summary.json and the summary: throughput, the plan and why, every candidate.
// Options a program launch cannot honour (--resume, --set, --nodes above 1, the slurm
// backend) are refused with exit 2 before anything runs. Returns the exit code: the program's
// as `dltune run` reports it (mpirun's codes), 2 bad input, 1 a failed tuning.
int run_program_launch(const LaunchOptions& o);

}  // namespace dltune::cli::launch_phases
