// The scaling efficiency's 1-rank baseline kept in the user database (schema v7, issue 42): a
// launch whose one rank would run what an earlier launch on a machine of this fingerprint ran
// reuses that measurement instead of spending up to 10 % of its time on it again.
//
// The identity of a baseline is what sets one rank's speed: the machine (topology fingerprint)
// and software (MPI, PMIx, dltune versions), the recipe's signature (model, data, batch,
// optimizer: recipes::recipe_signature, its learning rate left out), the one-rank plan it runs
// (baseline_plan(): batch, precision, kernels, micro-batches, threads), the data's path and the
// binding. The run's length is not part of it (the baseline runs its own length), nor are the
// job's collective rules (one rank sends nothing).
#pragma once

#include <optional>
#include <string>

#include "common/result.h"
#include "launcher/flow/launch_job.h"
#include "recipes/plan.h"
#include "topology/topology.h"
#include "tuner/db/records.h"

namespace dltune::launcher {

struct BaselineIdentity {
  tuner::db::Key key;     // 1 x 1 shape; recipe: the recipe's signature
  std::string plan_hash;  // SHA-256 (hex) of the one-rank plan and the data's path
  std::string bind;       // the job's binding policy (recipe launch.binding)
};

// The identity of `job`'s baseline under `plan` (the job's plan, before baseline_plan()) on a
// node of topology `topo`.
BaselineIdentity baseline_identity(const topology::Topology& topo, const Job& job,
                                   const recipes::Plan& plan);

// The identity of any measured plan (the shape search's ranks x threads candidates,
// shape_search.h): `plan` as `job`'s ranks run it, keyed by the plan's own job shape, and
// hashed as above (its collective rules included: several ranks send). baseline_identity() is
// this for baseline_plan(plan) without collective rules. The baselines table holds both: a
// row is a plan's measured throughput on a machine.
BaselineIdentity measured_plan_identity(const topology::Topology& topo, const Job& job,
                                        const recipes::Plan& plan);

// The baseline stored for `id` in the database at `db_path`, when it is there and was known
// within `max_rel_ci` (kBaselineRelCi by default: a wider one is measured again):
// Baseline::measured_at and measured_on say when and where it was measured. nullopt when the
// database does not exist or holds none. Errors: the database cannot be read, or its row is
// malformed (the caller measures instead and says why).
Result<std::optional<Baseline>> stored_baseline(const std::string& db_path,
                                                const BaselineIdentity& id,
                                                double max_rel_ci = kBaselineRelCi);

// Stores `b` (just measured, finite rel_ci) under `id` in the database at `db_path`, replacing an
// earlier baseline of the same identity; creates the database when needed. Errors as
// tuner::db::open_for_writing / TuningDb::put_baseline.
Status store_baseline(const std::string& db_path, const BaselineIdentity& id, const Baseline& b);

}  // namespace dltune::launcher
