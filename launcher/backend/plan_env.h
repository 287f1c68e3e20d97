// `dltune run --plan FILE` for programs that are not dltune's own ranks: what the plan means
// to the runtimes they use. dltune's ranks read the plan itself (PMIx job data, or the file
// DLTUNE_PLAN names); an Open MPI program learns the plan's collective choices from a
// coll/tuned rules file, an NCCL program from dltune's NCCL tuner plugin, and any program its
// CPU binding, GPU and NIC from the plan's placement.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/backend/rank_env.h"
#include "recipes/plan.h"
#include "topology/topology.h"

namespace dltune::launcher {

struct PlanEnv {
  // Open MPI coll/tuned rules (classic format) for a communicator of the job's size; "" when the
  // plan sets no collective Open MPI can take.
  std::string ompi_rules;
  // The plan's placement, one entry per local rank (empty: the plan has none, or it was made
  // for another number of ranks per node).
  std::vector<topology::RankPlacement> placement;
  // What was not applied and why, one sentence each (told to the user once).
  std::vector<std::string> notes;
  // What Open MPI runs where it lacks the plan's algorithm ("Open MPI: allreduce: shm ... using
  // recursive_doubling"): told to the user for their own program, not for dltune's worker, which
  // runs every algorithm of the plan itself (notes_for()).
  std::vector<std::string> mpi_notes;
  // Pipeline stages per replica (the Plan's parallel.stages): rank r runs stage r % stages of
  // replica r / stages. 1 without a pipeline.
  int stages = 1;
};

// The notes to tell the user for a job running `argv`: notes, and mpi_notes unless argv[0] is
// dltune's own worker (dltune-worker: its collectives are the plan's, not Open MPI's).
std::vector<std::string> notes_for(const PlanEnv& plan_env, const std::vector<std::string>& argv);

// "rank 3", or with stages "rank 3 (stage 1 of replica 1)": how failures name a rank.
std::string rank_label(const PlanEnv& plan_env, int rank);

// A plan file as `dltune run --plan` takes it: the Plan, and the file's text as every rank gets
// it (PMIx job data, DLTUNE_PLAN: the very file, not a rewrite of it).
struct PlanFile {
  recipes::Plan plan;
  std::string text;
};
// Reads the file `path` as a Plan (recipes::parse_plan, the Plan's one reader). Errors
// (invalid_input, exit 2, before any rank starts): a missing or unreadable file, text that is
// not a Plan ({"hello": 1}, an engine configuration), naming the file and what is wrong.
Result<PlanFile> read_plan_file(const std::string& path);

// What matters to external programs in `plan` for a job of `nranks` ranks with
// `ranks_per_node` on each node. A plan tuned for another job shape is applied with a note
// naming both shapes (its collective rules by message size as they are; its placement only
// when it places this many ranks per node); where Open MPI lacks the plan's algorithm, a note
// says what it runs instead.
PlanEnv plan_env_for(const recipes::Plan& plan, int nranks, int ranks_per_node);

// Writes the recipe as run as recipe.yaml (when `recipe_yaml` is not empty: DLTUNE_RECIPE) and
// the plan as plan.json (and ompi_rules.conf when there are rules) into `dir` (when `plan_json`
// is not empty) and returns the job-wide variables: DLTUNE_RECIPE, DLTUNE_PLAN,
// OMPI_MCA_coll_tuned_use_dynamic_rules and OMPI_MCA_coll_tuned_dynamic_rules_filename,
// NCCL_TUNER_PLUGIN (when dltune's plugin is installed next to this binary, in ../lib).
// Failure: kIo when a file cannot be written.
Result<EnvList> write_plan_files(const PlanEnv& plan_env, const std::string& plan_json,
                                 const std::string& recipe_yaml, const std::string& dir);

// dltune's NCCL tuner plugin next to the running binary (<bindir>/../lib), or "" when absent.
std::string nccl_tuner_plugin_path();

}  // namespace dltune::launcher
