#include "tuner/db/schema.h"

#include <string>

namespace dltune::tuner::db {
namespace {

// v0 -> v1: the first schema. Key columns first, then the row's data, then provenance.
constexpr const char* kCreateV1 = R"sql(
CREATE TABLE plans(
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL, mpi TEXT NOT NULL, pmix TEXT NOT NULL, nccl TEXT NOT NULL,
  dltune TEXT NOT NULL, nodes INTEGER NOT NULL, ranks_per_node INTEGER NOT NULL,
  recipe TEXT NOT NULL,
  plan_json TEXT NOT NULL,
  site TEXT NOT NULL, host TEXT NOT NULL, user_name TEXT NOT NULL,
  writer_version TEXT NOT NULL, created_at INTEGER NOT NULL,
  UNIQUE(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe));
CREATE TABLE measurements(
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL, mpi TEXT NOT NULL, pmix TEXT NOT NULL, nccl TEXT NOT NULL,
  dltune TEXT NOT NULL, nodes INTEGER NOT NULL, ranks_per_node INTEGER NOT NULL,
  recipe TEXT NOT NULL,
  collective TEXT NOT NULL, algorithm TEXT NOT NULL, segment_bytes INTEGER NOT NULL,
  bytes INTEGER NOT NULL, median_us REAL NOT NULL, p10_us REAL NOT NULL, p90_us REAL NOT NULL,
  iqr_us REAL NOT NULL, samples INTEGER NOT NULL, failed INTEGER NOT NULL, reason TEXT NOT NULL,
  site TEXT NOT NULL, host TEXT NOT NULL, user_name TEXT NOT NULL,
  writer_version TEXT NOT NULL, created_at INTEGER NOT NULL,
  UNIQUE(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe,
         collective, algorithm, segment_bytes, bytes));
PRAGMA user_version = 1;
)sql";

// v1 -> v2: the family key for near hits.
constexpr const char* kV1ToV2 = R"sql(
ALTER TABLE plans ADD COLUMN family TEXT NOT NULL DEFAULT '';
ALTER TABLE measurements ADD COLUMN family TEXT NOT NULL DEFAULT '';
CREATE INDEX plans_by_family ON plans(family, recipe);
PRAGMA user_version = 2;
)sql";

// v2 -> v3: recipe trial measurements. The median / IQR columns are NULL when the trial program
// did not report the distribution.
constexpr const char* kV2ToV3 = R"sql(
CREATE TABLE recipe_trials(
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL, mpi TEXT NOT NULL, pmix TEXT NOT NULL, nccl TEXT NOT NULL,
  dltune TEXT NOT NULL, nodes INTEGER NOT NULL, ranks_per_node INTEGER NOT NULL,
  recipe TEXT NOT NULL, family TEXT NOT NULL,
  plan_id INTEGER NOT NULL REFERENCES plans(id),
  round INTEGER NOT NULL, candidate INTEGER NOT NULL, label TEXT NOT NULL,
  per_rank_batch INTEGER NOT NULL, global_batch INTEGER NOT NULL, scaling TEXT NOT NULL,
  bucket_bytes INTEGER NOT NULL, overlap INTEGER NOT NULL, lr_scale REAL NOT NULL,
  steps INTEGER NOT NULL, samples_per_s REAL NOT NULL, step_s REAL NOT NULL,
  median_sps REAL, iqr_sps REAL, failed INTEGER NOT NULL, reason TEXT NOT NULL,
  site TEXT NOT NULL, host TEXT NOT NULL, user_name TEXT NOT NULL,
  writer_version TEXT NOT NULL, created_at INTEGER NOT NULL,
  UNIQUE(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, round, candidate));
CREATE INDEX recipe_trials_by_plan ON recipe_trials(plan_id);
PRAGMA user_version = 3;
)sql";

// v3 -> v4: who vouched for each imported row (signed_by: a trusted key's name, 'unsigned', or
// '' for rows made here), and the database's own settings (require_signature, trusted_keys).
constexpr const char* kV3ToV4 = R"sql(
ALTER TABLE plans ADD COLUMN signed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE measurements ADD COLUMN signed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE recipe_trials ADD COLUMN signed_by TEXT NOT NULL DEFAULT '';
CREATE TABLE settings(name TEXT PRIMARY KEY, value TEXT NOT NULL);
PRAGMA user_version = 4;
)sql";

// v4 -> v5: per-level alpha-beta-gamma cost models fitted from the sweeps (one row per key
// identity and level, with its fit error), and each recipe trial's step split: its compute,
// its exposed communication, and its buckets' allreduce seconds (a JSON array). NULL where a
// trial program did not report them.
constexpr const char* kV4ToV5 = R"sql(
CREATE TABLE cost_models(
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL, mpi TEXT NOT NULL, pmix TEXT NOT NULL, nccl TEXT NOT NULL,
  dltune TEXT NOT NULL, nodes INTEGER NOT NULL, ranks_per_node INTEGER NOT NULL,
  recipe TEXT NOT NULL, family TEXT NOT NULL,
  level TEXT NOT NULL, alpha_s REAL NOT NULL, beta_s_per_b REAL NOT NULL,
  gamma_s_per_b REAL NOT NULL, rel_rms REAL NOT NULL, points INTEGER NOT NULL,
  site TEXT NOT NULL, host TEXT NOT NULL, user_name TEXT NOT NULL,
  writer_version TEXT NOT NULL, created_at INTEGER NOT NULL,
  signed_by TEXT NOT NULL DEFAULT '',
  UNIQUE(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, level));
ALTER TABLE recipe_trials ADD COLUMN compute_s REAL;
ALTER TABLE recipe_trials ADD COLUMN exposed_comm_s REAL;
ALTER TABLE recipe_trials ADD COLUMN allreduce_s TEXT;
PRAGMA user_version = 5;
)sql";

// v5 -> v6: each recipe trial's training memory, the memory model's estimate beside the
// measured peak (NULL where a trial program did not report them).
constexpr const char* kV5ToV6 = R"sql(
ALTER TABLE recipe_trials ADD COLUMN memory_estimate_bytes INTEGER;
ALTER TABLE recipe_trials ADD COLUMN memory_peak_bytes INTEGER;
PRAGMA user_version = 6;
)sql";

// v6 -> v7: the scaling efficiency's 1-rank baselines (records.h BaselineRecord), keyed like a
// 1 x 1 plan plus what the rank ran and its binding, so that a launch of the same work on this
// machine reuses one instead of measuring again.
constexpr const char* kV6ToV7 = R"sql(
CREATE TABLE baselines(
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL, mpi TEXT NOT NULL, pmix TEXT NOT NULL, nccl TEXT NOT NULL,
  dltune TEXT NOT NULL, nodes INTEGER NOT NULL, ranks_per_node INTEGER NOT NULL,
  recipe TEXT NOT NULL, family TEXT NOT NULL,
  plan_hash TEXT NOT NULL, bind TEXT NOT NULL,
  samples_per_s REAL NOT NULL, steps INTEGER NOT NULL, rel_ci REAL NOT NULL,
  seconds REAL NOT NULL,
  site TEXT NOT NULL, host TEXT NOT NULL, user_name TEXT NOT NULL,
  writer_version TEXT NOT NULL, created_at INTEGER NOT NULL,
  signed_by TEXT NOT NULL DEFAULT '',
  UNIQUE(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, plan_hash, bind));
PRAGMA user_version = 7;
)sql";

// v7 -> v8: how computation and communication slowed each other (records.h InterferenceRecord),
// keyed like a one-node plan of the ranks that ran (the recipe column: the model's identity)
// plus each rank's threads and batch; the measured sizes as a JSON array.
constexpr const char* kV7ToV8 = R"sql(
CREATE TABLE interference(
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL, mpi TEXT NOT NULL, pmix TEXT NOT NULL, nccl TEXT NOT NULL,
  dltune TEXT NOT NULL, nodes INTEGER NOT NULL, ranks_per_node INTEGER NOT NULL,
  recipe TEXT NOT NULL, family TEXT NOT NULL,
  threads INTEGER NOT NULL, batch INTEGER NOT NULL, points_json TEXT NOT NULL,
  source TEXT NOT NULL,
  site TEXT NOT NULL, host TEXT NOT NULL, user_name TEXT NOT NULL,
  writer_version TEXT NOT NULL, created_at INTEGER NOT NULL,
  signed_by TEXT NOT NULL DEFAULT '',
  UNIQUE(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, threads, batch));
PRAGMA user_version = 8;
)sql";

constexpr const char* kSteps[] = {kCreateV1, kV1ToV2, kV2ToV3, kV3ToV4,
                                  kV4ToV5,   kV5ToV6, kV6ToV7, kV7ToV8};
static_assert(sizeof(kSteps) / sizeof(kSteps[0]) == kSchemaVersion);

Result<bool> has_foreign_tables(Connection& conn) {
  auto st = conn.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table'");
  if (!st) return std::move(st).error();
  auto row = st->step();
  if (!row) return std::move(row).error();
  return st->integer(0) > 0;
}

// A version this dltune can read or migrate: 0 (a new file) to kSchemaVersion. Anything else is
// refused before it can index kSteps: a negative PRAGMA user_version, written by anyone with
// write access to a shared file, would otherwise select memory past the array as SQL.
Status check_known(Connection& conn, int version) {
  if (version < 0) {
    return invalid_input("'" + conn.path() + "' has database schema version " +
                         std::to_string(version) +
                         ", which no dltune writes; it is damaged or not a dltune tuning "
                         "database (dltune's versions run from 1 to " +
                         std::to_string(kSchemaVersion) + ")");
  }
  if (version > kSchemaVersion) {
    return invalid_input("'" + conn.path() + "' has database schema version " +
                         std::to_string(version) + ", newer than this dltune supports (" +
                         std::to_string(kSchemaVersion) + "); use a newer dltune");
  }
  if (version == 0) {
    auto foreign = has_foreign_tables(conn);
    if (!foreign) return std::move(foreign).error();
    if (*foreign) {
      return invalid_input("'" + conn.path() +
                           "' is an SQLite database but not a dltune tuning database");
    }
    return ok_status();
  }
  // A version number without the tables every version has (a hand-made or damaged file) would
  // fail at its first read or write with "no such table".
  auto st = conn.prepare(
      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
      "('plans', 'measurements')");
  if (!st) return std::move(st).error();
  auto row = st->step();
  if (!row) return std::move(row).error();
  if (st->integer(0) != 2) {
    return invalid_input("'" + conn.path() + "' has database schema version " +
                         std::to_string(version) +
                         " but not the tables of a dltune tuning database; it is damaged or not "
                         "one");
  }
  return ok_status();
}

}  // namespace

Result<int> schema_version(Connection& conn) {
  auto st = conn.prepare("PRAGMA user_version");
  if (!st) return std::move(st).error();
  auto row = st->step();
  if (!row) return std::move(row).error();
  // user_version is a signed 32-bit integer in the file header: the cast loses nothing.
  return static_cast<int>(st->integer(0));
}

Status migrate(Connection& conn, int target) {
  DLTUNE_CHECK(target >= 1 && target <= kSchemaVersion);
  auto before = schema_version(conn);
  if (!before) return std::move(before).error();
  DLTUNE_TRY(check_known(conn, *before));
  if (*before >= target) return ok_status();
  // Another process may migrate at the same time: re-read the version under the write lock.
  while (true) {
    auto tx = Transaction::begin(conn);
    if (!tx) return std::move(tx).error();
    auto v = schema_version(conn);
    if (!v) return std::move(v).error();
    DLTUNE_TRY(check_known(conn, *v));
    if (*v >= target) return tx->commit();
    DLTUNE_CHECK(*v >= 0 && *v < kSchemaVersion);  // check_known bounds the index into kSteps
    DLTUNE_TRY_CTX(conn.exec(kSteps[*v]),
                   "migrating '" + conn.path() + "' from schema version " + std::to_string(*v));
    DLTUNE_TRY(tx->commit());
  }
}

Status prepare_read_only(Connection& conn, Connection& scratch, bool* use_scratch) {
  *use_scratch = false;
  auto v = schema_version(conn);
  if (!v) return std::move(v).error();
  DLTUNE_TRY(check_known(conn, *v));
  if (*v == kSchemaVersion) return ok_status();
  // Version 0 without tables (check_known refused any) is an empty database, as a 0-byte file
  // an older dltune left on a full disk: it holds nothing, and reads as such.
  DLTUNE_TRY(scratch.copy_from(conn));
  DLTUNE_TRY(migrate(scratch));
  *use_scratch = true;
  return ok_status();
}

}  // namespace dltune::tuner::db
