// TuningDb: one tuning database file (user or site). Plans, collective measurement summaries
// and recipe trials keyed by Key (records.h), each row with its provenance. A plan's recipe
// trials are written with it and replaced or deleted with it (never left without it). Every write
// is one transaction (all or nothing); concurrent writers wait on the busy timeout instead of
// failing.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "tuner/db/records.h"
#include "tuner/db/sqlite.h"

namespace dltune::tuner::db {

// Which rows a listing, export or prune covers; every unset field matches everything.
struct Filter {
  std::optional<std::string> fingerprint;
  std::optional<std::string> family;
  std::optional<std::string> recipe;
  std::optional<std::string> dltune_version;  // the key's dltune version
  std::optional<JobShape> shape;
};

// What to delete: rows matching every set criterion (at least one must be set).
struct PruneSpec {
  std::optional<int64_t> created_before;           // Unix seconds
  std::optional<std::string> keep_dltune_version;  // delete rows of any other dltune version
  std::optional<std::string> fingerprint;
};

// How an incoming row (bundle import, merge) resolves against a local row with the same key.
enum class ConflictPolicy {
  kKeepLocal,          // the local row stays
  kPreferNewer,        // the row with the later created_at wins (local on a tie)
  kPreferMoreSamples,  // measurements: more samples wins (local on a tie); plans: as kPreferNewer
};
// Parses "keep-local" | "prefer-newer" | "prefer-more-samples"; invalid_input otherwise.
Result<ConflictPolicy> parse_policy(std::string_view name);

struct MergeCounts {
  int64_t added = 0, replaced = 0, unchanged = 0, kept_local = 0;
};
// One plan that exists on both sides with different content: both rows, which one the
// database now holds and why ("keep-local: the local plan stays", "prefer-newer: the incoming
// plan (2024-05-01T10:00:00Z) is newer than the local one (...)").
struct PlanConflict {
  PlanRecord local;
  PlanRecord incoming;
  std::string source;  // where the incoming row came from ("" when not said)
  bool incoming_won = false;
  std::string why;
};
// Recipe trials follow their plan: added or replaced with it (a replaced plan's old trials go),
// kept_local when the local plan stays; with an unchanged plan they are unchanged when equal,
// added when the local plan has none, else kept_local.
struct MergeReport {
  MergeCounts plans, measurements, recipe_trials;
  std::vector<PlanConflict> plan_conflicts;  // every replaced or kept_local plan
  bool changed() const {
    return plans.added + plans.replaced + measurements.added + measurements.replaced +
               recipe_trials.added + recipe_trials.replaced >
           0;
  }
};

// A database's own policy for what it takes in (schema v4 settings table): imports and merges
// into it need a trusted signature when require_signature is on; trusted_keys names a
// trusted-keys file (signing.h; "" none). A database that sets either decides what it trusts:
// DLTUNE_TRUSTED_KEYS may narrow that, never widen it (bundle.h import_sources).
struct DbSettings {
  bool require_signature = false;
  std::string trusted_keys;
  bool operator==(const DbSettings&) const = default;
};

struct DbCounts {
  int schema_version = 0;
  int64_t plans = 0, measurements = 0, recipe_trials = 0, baselines = 0, interference = 0;
};

class TuningDb {
 public:
  // Opens (kReadWrite: creating and migrating to the current schema) the database at `path`.
  // A read-only database of an older schema is upgraded in memory, never on disk. Errors name
  // the path: missing file (read-only), not a dltune database, newer schema, I/O; kReadWrite on
  // a file or directory this user may not write is unsupported ("... is read-only ..."), so
  // that commands that only read open with kReadOnly.
  static Result<TuningDb> open(const std::string& path, OpenMode mode);

  // Inserts or replaces (same Key identity) one plan; one transaction. Validates first:
  // invalid_input and nothing written on a malformed row; a read-only database refuses.
  Status put_plan(const PlanRecord& plan);
  // Inserts or replaces the measurements, then the plan and its recipe trials (replacing the
  // plan's earlier trials), in one transaction: a crash leaves either all of them or none.
  // `plan` may be null (measurements only; then `trials` must be empty). invalid_input and
  // nothing written on a malformed row or a trial whose key identity is not the plan's.
  Status put_results(const PlanRecord* plan, std::span<const Measurement> measurements,
                     std::span<const RecipeTrial> trials = {});

  // The plan with exactly this identity (Key::same_identity), or nullopt.
  Result<std::optional<PlanRecord>> find_exact(const Key& key);
  // Plans with the same non-empty family and recipe (exact ones included; the caller ranks).
  Result<std::vector<PlanRecord>> find_family(const std::string& family, const std::string& recipe);

  Result<std::vector<PlanRecord>> plans(const Filter& filter = {});
  Result<std::vector<Measurement>> measurements(const Filter& filter = {});
  // Ordered by plan, then round, then candidate.
  Result<std::vector<RecipeTrial>> recipe_trials(const Filter& filter = {});
  Result<DbCounts> counts();

  // Inserts or replaces (same key identity and level) the per-level cost models, in one
  // transaction; invalid_input and nothing written on a malformed row (cost_models.cc).
  Status put_cost_models(std::span<const CostModel> models);
  Result<std::vector<CostModel>> cost_models(const Filter& filter = {});

  // Inserts or replaces (same key identity, plan_hash and bind) one 1-rank baseline in one
  // statement; invalid_input and nothing written on a malformed row (baselines.cc).
  Status put_baseline(const BaselineRecord& baseline);
  // The baseline with exactly this key identity, plan hash and binding, or nullopt; a stored row
  // that fails validate_baseline is an error naming the database.
  Result<std::optional<BaselineRecord>> find_baseline(const Key& key, const std::string& plan_hash,
                                                      const std::string& bind);

  // Inserts or replaces (same key identity, threads and batch) one measured interference in one
  // statement; invalid_input and nothing written on a malformed row (interference.cc).
  Status put_interference(const InterferenceRecord& r);
  // Every measured interference with exactly this key identity, by threads then batch; a stored
  // row that fails validate_interference is an error naming the database.
  Result<std::vector<InterferenceRecord>> interference(const Key& key);

  // Applies incoming rows under `policy` in one transaction after validating all of them
  // (validate_rows): on any invalid row nothing is written. Importing the same rows twice
  // changes nothing. `source` names where the rows came from in the conflict report.
  Result<MergeReport> merge_rows(std::span<const PlanRecord> plans,
                                 std::span<const Measurement> measurements, ConflictPolicy policy,
                                 std::span<const RecipeTrial> trials = {},
                                 const std::string& source = "");

  // The database's settings (defaults when none were set), and setting them (one
  // transaction; trusted_keys must be "" or an absolute path).
  Result<DbSettings> settings();
  Status set_settings(const DbSettings& settings);

  // Deletes the rows PruneSpec selects (plans, measurements, cost models, baselines and measured
  // interference, and the
  // recipe trials of every deleted plan) in one transaction; returns how many rows went.
  // invalid_input when no criterion is set.
  Result<int64_t> prune(const PruneSpec& spec);

  const std::string& path() const { return path_; }
  bool read_only() const { return read_only_; }
  Connection& connection() { return use_scratch_ ? scratch_ : conn_; }

  // Test hook (crash tests): called inside write transactions after each row is written,
  // with the number of rows written so far in that transaction.
  void set_row_hook(std::function<void(int64_t)> hook) { row_hook_ = std::move(hook); }

 private:
  TuningDb(Connection conn, Connection scratch)
      : conn_(std::move(conn)), scratch_(std::move(scratch)) {}
  Status check_writable() const;
  Status write_plan(const PlanRecord& plan);
  Status write_measurement(const Measurement& m);
  Result<std::optional<Measurement>> find_measurement(const Measurement& m);
  // Replaces the trials of the plan with `plan_key`'s identity (which must be stored) by
  // `trials`; counts each written row.
  Status write_trials(const Key& plan_key, std::span<const RecipeTrial* const> trials, int64_t* n);
  Result<std::vector<RecipeTrial>> trials_of(const Key& plan_key);
  void row_written(int64_t n) {
    if (row_hook_) row_hook_(n);
  }

  Connection conn_;
  Connection scratch_;
  std::string path_;
  bool read_only_ = false;
  bool use_scratch_ = false;
  std::function<void(int64_t)> row_hook_;
};

// Every row valid (records.h) and every trial with a plan of its key identity among `plans`:
// what merge_rows checks before its first write, for callers that must know before they
// create a database. Errors name the row ("plans[2]: key.fingerprint: ...").
Status validate_rows(std::span<const PlanRecord> plans, std::span<const Measurement> measurements,
                     std::span<const RecipeTrial> trials);

// Opens the database at `path` for writing (TuningDb::open, kReadWrite), creating its directory
// first when needed: how every command writes to the user database.
Result<TuningDb> open_for_writing(const std::string& path);
// Whether a plan could be stored in the database at `path` (open_for_writing) once measured:
// what a tuning command checks before it measures for minutes, creating and writing nothing.
// Ok for a database that does not exist yet; unsupported ("... is read-only ...") when this
// user may not write it or its directory; the error of TuningDb::open (kReadOnly) for a
// database that cannot be read or whose schema is negative, newer than this dltune's or not
// ours.
Status check_can_store(const std::string& path);
// open_for_writing(path), then put_results(&plan, measurements, trials): a plan stored with the
// measurements or recipe trials behind it, in one transaction.
Status store_plan(const std::string& path, const PlanRecord& plan,
                  std::span<const Measurement> measurements,
                  std::span<const RecipeTrial> trials = {});

}  // namespace dltune::tuner::db
