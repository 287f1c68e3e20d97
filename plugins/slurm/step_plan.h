// The per-step half of the SPANK plugin that needs more than Slurm: looking the plan up in the
// user and site databases for this node and step shape, and writing the plan and the Open MPI
// rules file where the tasks can read them. Runs as the job's user.
#pragma once

#include <string>

#include "common/result.h"
#include "topology/topology.h"

namespace dltune::plugins::slurm {

struct StepInputs {
  int nodes = 1;
  int local_tasks = 1;
  std::string user_db;   // the job's DLTUNE_DB, else its $HOME-based default ("" = none)
  std::string site_dbs;  // plugstack site_db plus the job's DLTUNE_SITE_DB, colon-separated
  std::string step_dir;  // private directory (0700) to write plan.json / ompi_rules.conf into
};

struct StepFiles {
  std::string plan_path;        // "" when there is no plan
  std::string ompi_rules_path;  // "" when the plan implies no Open MPI rules
  std::string description;      // one line for the log: where the plan came from
  // True when the plan found was stored for this node's fingerprint and this step's shape
  // (an exact hit, or a near hit differing only in software versions). False on a miss or a
  // near hit from another node or shape: `--dltune-tune` then tunes.
  bool matches_step = false;
};

// Looks the plan up (exact or near hit) and writes the files. A miss is not an error: it
// returns empty paths and says so in `description`. Errors: unreadable user database,
// unwritable step directory.
Result<StepFiles> prepare_step(const topology::Topology& topo, const StepInputs& in);

}  // namespace dltune::plugins::slurm
