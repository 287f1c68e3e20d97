// The tuning database schema and its migrations. The version lives in PRAGMA user_version.
//
//   v1: plans and measurements keyed by (fingerprint, mpi, pmix, nccl, dltune, nodes,
//       ranks_per_node, recipe), each row with its provenance (site, host, user_name,
//       writer_version, created_at).
//   v2: adds `family` (the coarse topology key for near hits) to both tables and an index on
//       (family, recipe) for the near-hit query; rows migrated from v1 get family '' and so
//       never produce near hits until re-measured.
//   v3: adds recipe_trials: one row per candidate per round of a recipe search, keyed like
//       plans (plus round and candidate), linked to the plan row it produced (plan_id), with
//       provenance. Earlier databases simply have no trials.
//   v4: adds signed_by to the three row tables (who vouched for an imported row: a trusted
//       key's name, 'unsigned', or '' for a row made on this machine; rows of earlier
//       databases read as made here) and a settings table (name -> value) for the database's
//       own policy: require_signature, trusted_keys (store.h).
//   v5: adds cost_models (per-level alpha-beta-gamma fits) and each recipe trial's step split.
//   v6: adds each recipe trial's training memory (estimate and measured peak).
//   v7: adds baselines: the scaling efficiency's 1-rank baselines measured on this machine
//       (records.h BaselineRecord), which a later launch of the same work reuses.
//   v8: adds interference: how computation and communication slowed each other while both ran
//       on this machine (records.h InterferenceRecord), which later predictions use.
//
// Each step runs in its own transaction; a database is always at exactly one version.
#pragma once

#include "common/result.h"
#include "tuner/db/sqlite.h"

namespace dltune::tuner::db {

inline constexpr int kSchemaVersion = 8;

// The schema version stored in `conn` (0 for a new, empty file).
Result<int> schema_version(Connection& conn);

// Brings a writable database up to `target` (default: kSchemaVersion) one step at a time.
// Concurrent callers serialise on the write lock; a step already done by another process is
// skipped. Fails with invalid_input when the file's version is negative or newer than this
// dltune knows, or when it holds tables that are not ours; the database is unchanged on failure.
Status migrate(Connection& conn, int target = kSchemaVersion);

// For a read-only database: ok when it is at kSchemaVersion; a database at an older version
// (or an empty one, version 0 without tables) is copied into `scratch` (an in-memory database)
// and migrated there, and *use_scratch is set.
// Errors as migrate(); the file itself is never written.
Status prepare_read_only(Connection& conn, Connection& scratch, bool* use_scratch);

}  // namespace dltune::tuner::db
