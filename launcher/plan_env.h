// `dltune run --plan FILE` for programs that are not dltune's own ranks: what the plan means
// to the runtimes they use. dltune's ranks read the plan itself (PMIx job data, or the file
// DLTUNE_PLAN names); an Open MPI program learns the plan's collective choices from a
// coll/tuned rules file, an NCCL program from dltune's NCCL tuner plugin, and any program its
// CPU binding, GPU and NIC from the plan's placement.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/rank_env.h"
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
  // Pipeline stages per replica (a TrainConfig's "stages", a Plan's parallel.stages): rank r
  // runs stage r % stages of replica r / stages. 1 without a pipeline.
  int stages = 1;
};

// "rank 3", or with stages "rank 3 (stage 1 of replica 1)": how failures name a rank.
std::string rank_label(const PlanEnv& plan_env, int rank);

// Reads what matters to external programs from `plan_json` for a job of `nranks` ranks with
// `ranks_per_node` on each node. Never fails: text that is not a dltune plan yields an empty
// PlanEnv and a note (the ranks still get the text as their plan).
PlanEnv plan_env_for(const std::string& plan_json, int nranks, int ranks_per_node);

// Writes the plan as plan.json (and ompi_rules.conf when there are rules) into `dir` and
// returns the job-wide variables: DLTUNE_PLAN, OMPI_MCA_coll_tuned_use_dynamic_rules and
// OMPI_MCA_coll_tuned_dynamic_rules_filename, NCCL_TUNER_PLUGIN (when dltune's plugin is
// installed next to this binary, in ../lib). Failure: kIo when a file cannot be written.
Result<EnvList> write_plan_files(const PlanEnv& plan_env, const std::string& plan_json,
                                 const std::string& dir);

// dltune's NCCL tuner plugin next to the running binary (<bindir>/../lib), or "" when absent.
std::string nccl_tuner_plugin_path();

}  // namespace dltune::launcher
