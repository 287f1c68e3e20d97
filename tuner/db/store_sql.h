// SQL text and row (de)serialisation shared by store.cc and store_merge.cc. Internal to
// tuner/db. All SQL is built from string literals at compile time; values are always bound.
#pragma once

#include <vector>

#include "tuner/db/records.h"
#include "tuner/db/sqlite.h"
#include "tuner/db/store.h"

// Column order everywhere: the 8 identity columns, family, the row's data, provenance (6).
#define DLTUNE_DB_KEY_COLS \
  "fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, family"
#define DLTUNE_DB_PROV_COLS "site, host, user_name, writer_version, created_at, signed_by"
#define DLTUNE_DB_IDENTITY_WHERE                                                              \
  "fingerprint = ?1 AND mpi = ?2 AND pmix = ?3 AND nccl = ?4 AND dltune = ?5 AND nodes = ?6 " \
  "AND ranks_per_node = ?7 AND recipe = ?8"
#define DLTUNE_DB_PLAN_COLS DLTUNE_DB_KEY_COLS ", plan_json, " DLTUNE_DB_PROV_COLS
#define DLTUNE_DB_MEAS_COLS                                            \
  DLTUNE_DB_KEY_COLS                                                   \
  ", collective, algorithm, segment_bytes, bytes, median_us, p10_us, " \
  "p90_us, iqr_us, samples, failed, reason, " DLTUNE_DB_PROV_COLS

// Recipe trials (schema v3, signed_by v4, the step split v5, the memory v6); plan_id is written
// but not part of the read-back columns.
#define DLTUNE_DB_TRIAL_COLS                                                                  \
  DLTUNE_DB_KEY_COLS                                                                          \
  ", round, candidate, label, per_rank_batch, global_batch, scaling, bucket_bytes, overlap, " \
  "lr_scale, steps, samples_per_s, step_s, median_sps, iqr_sps, failed, "                     \
  "reason, " DLTUNE_DB_PROV_COLS                                                              \
  ", compute_s, exposed_comm_s, allreduce_s, "                                                \
  "memory_estimate_bytes, memory_peak_bytes"
// A Filter bound to ?1..?6 (bind_filter).
#define DLTUNE_DB_FILTER_WHERE                                                   \
  " WHERE (?1 IS NULL OR fingerprint = ?1) AND (?2 IS NULL OR family = ?2) AND " \
  "(?3 IS NULL OR recipe = ?3) AND (?4 IS NULL OR dltune = ?4) AND "             \
  "(?5 IS NULL OR nodes = ?5) AND (?6 IS NULL OR ranks_per_node = ?6)"

namespace dltune::tuner::db::detail {

// Binds the 8 identity columns to ?first .. ?first+7 and, when `with_family`, family to ?first+8.
void bind_key(Statement& st, int first, const Key& k, bool with_family);
void bind_provenance(Statement& st, int first, const Provenance& p);
// Read back in the column order above, starting at column `first`.
Key read_key(const Statement& st, int first);
Provenance read_provenance(const Statement& st, int first);
PlanRecord read_plan(const Statement& st);
Measurement read_measurement(const Statement& st);
RecipeTrial read_trial(const Statement& st);
void bind_filter(Statement& st, const Filter& f);
// Every value of a trial but its plan_id bound in DLTUNE_DB_TRIAL_COLS order to ?1..?36.
void bind_trial(Statement& st, const RecipeTrial& t);
// True when both hold the same rows (every field), in any order.
bool same_trials(std::vector<RecipeTrial> a, std::vector<RecipeTrial> b);

}  // namespace dltune::tuner::db::detail
