#include "tuner/db/store.h"

#include <atomic>
#include <cerrno>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "common/paths.h"
#include "tuner/db/schema.h"
#include "tuner/db/store_sql.h"

namespace dltune::tuner::db {
namespace detail {

void bind_key(Statement& st, int first, const Key& k, bool with_family) {
  st.bind(first, k.fingerprint)
      .bind(first + 1, k.versions.mpi)
      .bind(first + 2, k.versions.pmix)
      .bind(first + 3, k.versions.nccl)
      .bind(first + 4, k.versions.dltune)
      .bind(first + 5, k.shape.nodes)
      .bind(first + 6, k.shape.ranks_per_node)
      .bind(first + 7, k.recipe);
  if (with_family) st.bind(first + 8, k.family);
}

void bind_provenance(Statement& st, int first, const Provenance& p) {
  st.bind(first, p.site)
      .bind(first + 1, p.host)
      .bind(first + 2, p.user)
      .bind(first + 3, p.dltune_version)
      .bind(first + 4, p.created_at)
      .bind(first + 5, p.signed_by);
}

Key read_key(const Statement& st, int c) {
  Key k;
  k.fingerprint = st.text(c);
  k.versions = {st.text(c + 1), st.text(c + 2), st.text(c + 3), st.text(c + 4)};
  k.shape = {st.integer(c + 5), st.integer(c + 6)};
  k.recipe = st.text(c + 7);
  k.family = st.text(c + 8);
  return k;
}

Provenance read_provenance(const Statement& st, int c) {
  return {st.text(c),     st.text(c + 1),    st.text(c + 2),
          st.text(c + 3), st.integer(c + 4), st.text(c + 5)};
}

PlanRecord read_plan(const Statement& st) {
  return {read_key(st, 0), st.text(9), read_provenance(st, 10)};
}

Measurement read_measurement(const Statement& st) {
  Measurement m;
  m.key = read_key(st, 0);
  m.collective = st.text(9);
  m.algorithm = st.text(10);
  m.segment_bytes = static_cast<uint64_t>(st.integer(11));
  m.bytes = static_cast<uint64_t>(st.integer(12));
  m.median_us = st.real(13);
  m.p10_us = st.real(14);
  m.p90_us = st.real(15);
  m.iqr_us = st.real(16);
  m.samples = st.integer(17);
  m.failed = st.integer(18) != 0;
  m.reason = st.text(19);
  m.provenance = read_provenance(st, 20);
  return m;
}

void bind_filter(Statement& st, const Filter& f) {
  auto opt = [&st](int i, const std::optional<std::string>& v) {
    if (v) {
      st.bind(i, *v);
    } else {
      st.bind_null(i);
    }
  };
  opt(1, f.fingerprint);
  opt(2, f.family);
  opt(3, f.recipe);
  opt(4, f.dltune_version);
  if (f.shape) {
    st.bind(5, f.shape->nodes).bind(6, f.shape->ranks_per_node);
  } else {
    st.bind_null(5).bind_null(6);
  }
}

}  // namespace detail

using namespace detail;  // NOLINT: the helpers above are this file's vocabulary

Result<ConflictPolicy> parse_policy(std::string_view name) {
  if (name == "keep-local") return ConflictPolicy::kKeepLocal;
  if (name == "prefer-newer") return ConflictPolicy::kPreferNewer;
  if (name == "prefer-more-samples") return ConflictPolicy::kPreferMoreSamples;
  return invalid_input("unknown conflict policy " + quote_for_error(name) +
                       "; expected keep-local, prefer-newer or prefer-more-samples");
}

namespace {

// Why this process may not write the database at `path`, "" when it may: the file itself, or
// (for a file not there yet, or the WAL files next to it) its directory.
std::string write_refusal(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  if (::access(path.c_str(), F_OK) == 0) {
    if (::access(path.c_str(), W_OK) != 0) return "the file is not writable by this user";
  }
  if (::access(dir.c_str(), F_OK) == 0 && ::access(dir.c_str(), W_OK) != 0) {
    return "its directory '" + dir + "' is not writable by this user";
  }
  return "";
}

// Removes a database file and the journal files SQLite keeps next to it.
void remove_database_files(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    (void)::unlink((path + suffix).c_str());
  }
}

// Creates the database `path`, which does not exist, whole or not at all: it is made and
// migrated under a temporary name in the same directory, checkpointed into that one file, then
// linked into place (link(2) never replaces a file: when another process created `path`
// meanwhile, its database stays and this copy goes). A full disk, or any other failure, leaves
// nothing behind: no 0-byte or half-made file that every later command would refuse.
Status create_whole(const std::string& path) {
  static std::atomic<int> counter{0};
  const std::string tmp =
      path + ".new-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return errno == ENOSPC ? io_error("no space left on device writing '" + path + "'")
                           : errno_error("cannot create the database '" + path + "'");
  }
  ::close(fd);
  Status made = [&]() -> Status {
    auto conn = Connection::open(tmp, OpenMode::kReadWrite);
    if (!conn) return std::move(conn).error();
    DLTUNE_TRY(migrate(*conn));
    // Everything into the main file: the link below takes that file alone.
    auto st = conn->prepare("PRAGMA wal_checkpoint(TRUNCATE)");
    if (!st) return std::move(st).error();
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row || st->integer(0) != 0) {
      return io_error("cannot create the database '" + path + "': its first checkpoint failed");
    }
    return ok_status();
  }();
  if (made.ok() && ::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    made = errno == ENOSPC ? io_error("no space left on device writing '" + path + "'")
                           : errno_error("cannot create the database '" + path + "'");
  }
  remove_database_files(tmp);
  if (made.ok()) return made;
  // The messages name the file they were about: the temporary one is `path` to the user.
  std::string message = made.error().message();
  for (size_t at = message.find(tmp); at != std::string::npos; at = message.find(tmp, at)) {
    message.replace(at, tmp.size(), path);
  }
  return Error(made.error().kind(), message);
}

}  // namespace

Result<TuningDb> TuningDb::open(const std::string& path, OpenMode mode) {
  if (mode == OpenMode::kReadWrite) {
    // SQLite would open it read-only without a word and fail later with "cannot read ... as an
    // SQLite database": say what it is instead.
    if (const std::string why = write_refusal(path); !why.empty()) {
      return unsupported("database '" + path + "' is read-only (" + why +
                         "); nothing was written. Write to another database with --db or "
                         "DLTUNE_DB");
    }
  }
  if (mode == OpenMode::kReadWrite && path != ":memory:" && !paths::exists(path)) {
    DLTUNE_TRY(create_whole(path));
  }
  auto conn = Connection::open(path, mode);
  if (!conn) return std::move(conn).error();
  TuningDb db(std::move(*conn), Connection());
  db.path_ = path;
  db.read_only_ = mode == OpenMode::kReadOnly;
  if (db.read_only_) {
    auto scratch = Connection::open_memory();
    if (!scratch) return std::move(scratch).error();
    db.scratch_ = std::move(*scratch);
    DLTUNE_TRY(prepare_read_only(db.conn_, db.scratch_, &db.use_scratch_));
  } else {
    DLTUNE_TRY(migrate(db.conn_));
  }
  return db;
}

Status TuningDb::check_writable() const {
  if (read_only_) {
    return unsupported("database '" + path_ + "' is opened read-only; nothing was written");
  }
  return ok_status();
}

Result<DbSettings> TuningDb::settings() {
  DbSettings out;
  auto st = connection().prepare("SELECT name, value FROM settings");
  if (!st) return std::move(st).error();
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) return out;
    const std::string name = st->text(0), value = st->text(1);
    if (name == "require_signature") out.require_signature = value == "on";
    if (name == "trusted_keys") out.trusted_keys = value;
  }
}

Status TuningDb::set_settings(const DbSettings& s) {
  DLTUNE_TRY(check_writable());
  if (!s.trusted_keys.empty() && (s.trusted_keys[0] != '/' || s.trusted_keys.size() > 4096)) {
    return invalid_input("trusted_keys: expected an absolute path, got " +
                         quote_for_error(s.trusted_keys));
  }
  auto tx = Transaction::begin(connection());
  if (!tx) return std::move(tx).error();
  for (const auto& [name, value] : {std::pair<const char*, std::string>{
                                        "require_signature", s.require_signature ? "on" : "off"},
                                    {"trusted_keys", s.trusted_keys}}) {
    auto st = connection().prepare(
        "INSERT INTO settings(name, value) VALUES(?1, ?2) "
        "ON CONFLICT(name) DO UPDATE SET value = excluded.value");
    if (!st) return std::move(st).error();
    st->bind(1, name).bind(2, value);
    DLTUNE_TRY_CTX(st->run(), "writing the settings of '" + path_ + "'");
  }
  return tx->commit();
}

Status TuningDb::write_plan(const PlanRecord& p) {
  auto st = connection().prepare(
      "INSERT INTO plans(" DLTUNE_DB_PLAN_COLS
      ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) "
      "ON CONFLICT(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe) DO "
      "UPDATE SET family = excluded.family, plan_json = excluded.plan_json, site = excluded.site, "
      "host = excluded.host, user_name = excluded.user_name, "
      "writer_version = excluded.writer_version, created_at = excluded.created_at, "
      "signed_by = excluded.signed_by");
  if (!st) return std::move(st).error();
  bind_key(*st, 1, p.key, true);
  st->bind(10, p.plan_json);
  bind_provenance(*st, 11, p.provenance);
  return st->run();
}

Status TuningDb::write_measurement(const Measurement& m) {
  auto st = connection().prepare(
      "INSERT INTO measurements(" DLTUNE_DB_MEAS_COLS
      ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
      "?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26) "
      "ON CONFLICT(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, "
      "collective, algorithm, segment_bytes, bytes) DO UPDATE SET family = excluded.family, "
      "median_us = excluded.median_us, p10_us = excluded.p10_us, p90_us = excluded.p90_us, "
      "iqr_us = excluded.iqr_us, samples = excluded.samples, failed = excluded.failed, "
      "reason = excluded.reason, site = excluded.site, host = excluded.host, "
      "user_name = excluded.user_name, writer_version = excluded.writer_version, "
      "created_at = excluded.created_at, signed_by = excluded.signed_by");
  if (!st) return std::move(st).error();
  bind_key(*st, 1, m.key, true);
  st->bind(10, m.collective)
      .bind(11, m.algorithm)
      .bind(12, static_cast<int64_t>(m.segment_bytes))
      .bind(13, static_cast<int64_t>(m.bytes))
      .bind(14, m.median_us)
      .bind(15, m.p10_us)
      .bind(16, m.p90_us)
      .bind(17, m.iqr_us)
      .bind(18, m.samples)
      .bind(19, int64_t{m.failed ? 1 : 0})
      .bind(20, m.reason);
  bind_provenance(*st, 21, m.provenance);
  return st->run();
}

Status TuningDb::put_plan(const PlanRecord& plan) { return put_results(&plan, {}); }

Status TuningDb::put_results(const PlanRecord* plan, std::span<const Measurement> ms,
                             std::span<const RecipeTrial> trials) {
  DLTUNE_TRY(check_writable());
  if (plan != nullptr) DLTUNE_TRY_CTX(validate_plan(*plan), "storing a plan");
  for (const Measurement& m : ms) DLTUNE_TRY_CTX(validate_measurement(m), "storing a measurement");
  std::vector<const RecipeTrial*> own;
  for (const RecipeTrial& t : trials) {
    DLTUNE_TRY_CTX(validate_trial(t), "storing a recipe trial");
    if (plan == nullptr || !t.key.same_identity(plan->key)) {
      return invalid_input("storing a recipe trial: it is not keyed like the plan stored with it");
    }
    own.push_back(&t);
  }
  auto tx = Transaction::begin(connection());
  if (!tx) return std::move(tx).error();
  int64_t n = 0;
  for (const Measurement& m : ms) {
    DLTUNE_TRY_CTX(write_measurement(m), "storing a measurement in '" + path_ + "'");
    row_written(++n);
  }
  if (plan != nullptr) {
    DLTUNE_TRY_CTX(write_plan(*plan), "storing a plan in '" + path_ + "'");
    row_written(++n);
    DLTUNE_TRY_CTX(write_trials(plan->key, own, &n), "storing recipe trials in '" + path_ + "'");
  }
  return tx->commit();
}

Result<std::optional<PlanRecord>> TuningDb::find_exact(const Key& key) {
  auto st = connection().prepare("SELECT " DLTUNE_DB_PLAN_COLS
                                 " FROM plans WHERE " DLTUNE_DB_IDENTITY_WHERE);
  if (!st) return std::move(st).error();
  bind_key(*st, 1, key, false);
  auto row = st->step();
  if (!row) return std::move(row).error();
  if (!*row) return std::optional<PlanRecord>();
  return std::optional<PlanRecord>(read_plan(*st));
}

Result<std::vector<PlanRecord>> TuningDb::find_family(const std::string& family,
                                                      const std::string& recipe) {
  std::vector<PlanRecord> out;
  if (family.empty()) return out;
  auto st = connection().prepare("SELECT " DLTUNE_DB_PLAN_COLS
                                 " FROM plans WHERE family = ?1 AND recipe = ?2");
  if (!st) return std::move(st).error();
  st->bind(1, family).bind(2, recipe);
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) return out;
    out.push_back(read_plan(*st));
  }
}

Result<std::vector<PlanRecord>> TuningDb::plans(const Filter& filter) {
  auto st = connection().prepare("SELECT " DLTUNE_DB_PLAN_COLS " FROM plans" DLTUNE_DB_FILTER_WHERE
                                 " ORDER BY id");
  if (!st) return std::move(st).error();
  bind_filter(*st, filter);
  std::vector<PlanRecord> out;
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) return out;
    out.push_back(read_plan(*st));
  }
}

Result<std::vector<Measurement>> TuningDb::measurements(const Filter& filter) {
  auto st = connection().prepare("SELECT " DLTUNE_DB_MEAS_COLS
                                 " FROM measurements" DLTUNE_DB_FILTER_WHERE " ORDER BY id");
  if (!st) return std::move(st).error();
  bind_filter(*st, filter);
  std::vector<Measurement> out;
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) return out;
    out.push_back(read_measurement(*st));
  }
}

Result<DbCounts> TuningDb::counts() {
  DbCounts c;
  auto v = schema_version(connection());
  if (!v) return std::move(v).error();
  c.schema_version = *v;
  auto st = connection().prepare(
      "SELECT (SELECT count(*) FROM plans), (SELECT count(*) FROM measurements), "
      "(SELECT count(*) FROM recipe_trials), (SELECT count(*) FROM baselines), "
      "(SELECT count(*) FROM interference)");
  if (!st) return std::move(st).error();
  auto row = st->step();
  if (!row) return std::move(row).error();
  c.plans = st->integer(0);
  c.measurements = st->integer(1);
  c.recipe_trials = st->integer(2);
  c.baselines = st->integer(3);
  c.interference = st->integer(4);
  return c;
}

Result<int64_t> TuningDb::prune(const PruneSpec& spec) {
  DLTUNE_TRY(check_writable());
  if (!spec.created_before && !spec.keep_dltune_version && !spec.fingerprint) {
    return invalid_input(
        "prune needs at least one criterion (older than, other versions, "
        "fingerprint)");
  }
  auto tx = Transaction::begin(connection());
  if (!tx) return std::move(tx).error();
  int64_t removed = 0;
  for (const char* sql :
       {"DELETE FROM plans WHERE (?1 IS NULL OR created_at < ?1) AND (?2 IS NULL OR dltune <> ?2) "
        "AND (?3 IS NULL OR fingerprint = ?3)",
        "DELETE FROM measurements WHERE (?1 IS NULL OR created_at < ?1) AND "
        "(?2 IS NULL OR dltune <> ?2) AND (?3 IS NULL OR fingerprint = ?3)",
        "DELETE FROM cost_models WHERE (?1 IS NULL OR created_at < ?1) AND "
        "(?2 IS NULL OR dltune <> ?2) AND (?3 IS NULL OR fingerprint = ?3)",
        "DELETE FROM baselines WHERE (?1 IS NULL OR created_at < ?1) AND "
        "(?2 IS NULL OR dltune <> ?2) AND (?3 IS NULL OR fingerprint = ?3)",
        "DELETE FROM interference WHERE (?1 IS NULL OR created_at < ?1) AND "
        "(?2 IS NULL OR dltune <> ?2) AND (?3 IS NULL OR fingerprint = ?3)"}) {
    auto st = connection().prepare(sql);
    if (!st) return std::move(st).error();
    if (spec.created_before)
      st->bind(1, *spec.created_before);
    else
      st->bind_null(1);
    if (spec.keep_dltune_version)
      st->bind(2, *spec.keep_dltune_version);
    else
      st->bind_null(2);
    if (spec.fingerprint)
      st->bind(3, *spec.fingerprint);
    else
      st->bind_null(3);
    DLTUNE_TRY_CTX(st->run(), "pruning '" + path_ + "'");
    removed += st->changes();
  }
  // The trials of every plan that went.
  auto orphans =
      connection().prepare("DELETE FROM recipe_trials WHERE plan_id NOT IN (SELECT id FROM plans)");
  if (!orphans) return std::move(orphans).error();
  DLTUNE_TRY_CTX(orphans->run(), "pruning '" + path_ + "'");
  removed += orphans->changes();
  DLTUNE_TRY(tx->commit());
  return removed;
}

Result<TuningDb> open_for_writing(const std::string& path) {
  if (const auto slash = path.rfind('/'); slash != std::string::npos && slash > 0) {
    DLTUNE_TRY(paths::make_dirs(path.substr(0, slash)));
  }
  return TuningDb::open(path, OpenMode::kReadWrite);
}

Status check_can_store(const std::string& path) {
  if (const std::string why = write_refusal(path); !why.empty()) {
    return unsupported("database '" + path + "' is read-only (" + why +
                       "), so nothing measured could be stored; nothing was measured. Write "
                       "to another database with --db or DLTUNE_DB");
  }
  if (!paths::exists(path)) return ok_status();
  auto db = TuningDb::open(path, OpenMode::kReadOnly);
  if (!db) return std::move(db).error().wrap("nothing was measured");
  return ok_status();
}

Status store_plan(const std::string& path, const PlanRecord& plan,
                  std::span<const Measurement> measurements, std::span<const RecipeTrial> trials) {
  auto db = open_for_writing(path);
  if (!db) return std::move(db).error();
  return db->put_results(&plan, measurements, trials);
}

}  // namespace dltune::tuner::db
