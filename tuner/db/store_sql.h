// SQL text and row (de)serialisation shared by store.cc and store_merge.cc. Internal to
// tuner/db. All SQL is built from string literals at compile time; values are always bound.
#pragma once

#include "tuner/db/records.h"
#include "tuner/db/sqlite.h"

// Column order everywhere: the 8 identity columns, family, the row's data, provenance (5).
#define DLTUNE_DB_KEY_COLS \
  "fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, family"
#define DLTUNE_DB_PROV_COLS "site, host, user_name, writer_version, created_at"
#define DLTUNE_DB_IDENTITY_WHERE                                                              \
  "fingerprint = ?1 AND mpi = ?2 AND pmix = ?3 AND nccl = ?4 AND dltune = ?5 AND nodes = ?6 " \
  "AND ranks_per_node = ?7 AND recipe = ?8"
#define DLTUNE_DB_PLAN_COLS DLTUNE_DB_KEY_COLS ", plan_json, " DLTUNE_DB_PROV_COLS
#define DLTUNE_DB_MEAS_COLS                                            \
  DLTUNE_DB_KEY_COLS                                                   \
  ", collective, algorithm, segment_bytes, bytes, median_us, p10_us, " \
  "p90_us, iqr_us, samples, failed, reason, " DLTUNE_DB_PROV_COLS

namespace dltune::tuner::db::detail {

// Binds the 8 identity columns to ?first .. ?first+7 and, when `with_family`, family to ?first+8.
void bind_key(Statement& st, int first, const Key& k, bool with_family);
void bind_provenance(Statement& st, int first, const Provenance& p);
// Read back in the column order above, starting at column `first`.
Key read_key(const Statement& st, int first);
Provenance read_provenance(const Statement& st, int first);
PlanRecord read_plan(const Statement& st);
Measurement read_measurement(const Statement& st);

}  // namespace dltune::tuner::db::detail
