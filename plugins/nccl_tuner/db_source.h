// Where the NCCL tuner plugin finds its plan when DLTUNE_PLAN is not set: the tuning
// databases (tuner/db lookup_plan through the layers of DLTUNE_DB / DLTUNE_SITE_DB, the user
// database defaulting to the XDG path), under the key `dltune tune` stores plans with
// (tuner/key.h make_key: this node's topology — DLTUNE_TOPO_XML when set — and the
// communicator's shape nNodes x nRanks/nNodes).
#pragma once

#include <cstddef>
#include <string>

#include "common/result.h"

namespace dltune::plugins {

struct DbPlan {
  std::string plan_json;    // "" on a miss
  std::string description;  // one log line: where it came from, or why there is none
};

// A miss (no database, no plan, a communicator shape that is not nodes x ranks-per-node) is
// not an error: it returns an empty plan and says why. Errors: the node's topology cannot be
// read, or the user database exists but cannot be read.
Result<DbPlan> plan_from_db(size_t n_ranks, size_t n_nodes);

}  // namespace dltune::plugins
