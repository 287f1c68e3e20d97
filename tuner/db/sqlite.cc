#include "tuner/db/sqlite.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include <sys/stat.h>

namespace dltune::tuner::db {
namespace {

Error classify(int code, const std::string& message) {
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return timeout_error(message + " (the database stayed locked by another process)");
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return invalid_input(message);
    case SQLITE_CANTOPEN:
      return io_error(message);
    default:
      return io_error(message);
  }
}

// "file:" URI for `path` with ?immutable=1: percent-encodes the characters URIs give meaning to.
std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      static const char* kHex = "0123456789ABCDEF";
      uri += '%';
      uri += kHex[(static_cast<unsigned char>(c) >> 4) & 0xf];
      uri += kHex[static_cast<unsigned char>(c) & 0xf];
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

// A probe that makes SQLite actually read the file (opening is lazy).
int probe(sqlite3* db) {
  return sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
}

// Puts the database in WAL mode (a no-op once it is). Switching a fresh file takes an exclusive
// lock, and SQLite answers SQLITE_BUSY at once, without the busy handler (which could deadlock),
// while another connection holds a shared lock: four processes opening one new database failed
// this way about 1 time in 10. So: retry, backing off up to 20 ms, for `busy_timeout_ms`.
Status switch_to_wal(Connection& conn, int busy_timeout_ms) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(busy_timeout_ms, 0));
  for (int wait_ms = 1;; wait_ms = std::min(2 * wait_ms, 20)) {
    Status s = conn.exec("PRAGMA journal_mode=WAL");
    if (s || s.error().kind() != ErrorKind::kTimeout || std::chrono::steady_clock::now() >= until) {
      return s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  }
}

}  // namespace

Result<Connection> Connection::open(const std::string& path, OpenMode mode, int busy_timeout_ms) {
  const bool ro = mode == OpenMode::kReadOnly;
  struct stat st {};
  if (ro && ::stat(path.c_str(), &st) != 0) {
    return not_found("database '" + path + "' does not exist");
  }
  Connection conn;
  conn.path_ = path;
  conn.read_only_ = ro;
  sqlite3* raw = nullptr;
  const int flags = ro ? SQLITE_OPEN_READONLY
                       : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  conn.db_.reset(raw);
  if (rc != SQLITE_OK) return conn.last_error("cannot open database '" + path + "'");
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  rc = probe(raw);
  if (ro && rc != SQLITE_OK && rc != SQLITE_NOTADB && rc != SQLITE_CORRUPT) {
    // A WAL database in a directory we may not write: read it as an immutable snapshot.
    conn.db_.reset();
    rc = sqlite3_open_v2(immutable_uri(path).c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                         nullptr);
    conn.db_.reset(raw);
    if (rc == SQLITE_OK) rc = probe(raw);
  }
  if (rc != SQLITE_OK) {
    return conn.last_error("cannot read '" + path + "' as an SQLite database");
  }
  if (!ro) DLTUNE_TRY_CTX(switch_to_wal(conn, busy_timeout_ms), "opening '" + path + "'");
  return conn;
}

Result<Connection> Connection::open_memory() {
  Connection conn;
  conn.path_ = ":memory:";
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(":memory:", &raw, SQLITE_OPEN_READWRITE, nullptr);
  conn.db_.reset(raw);
  if (rc != SQLITE_OK) return conn.last_error("cannot open an in-memory database");
  return conn;
}

Status Connection::exec(const char* sql) {
  if (sqlite3_exec(db_.get(), sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return last_error(std::string("running '") + std::string(sql).substr(0, 40) + "'");
  }
  return ok_status();
}

Result<Statement> Connection::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc =
      sqlite3_prepare_v2(db_.get(), sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return last_error("preparing '" + std::string(sql.substr(0, 40)) + "'");
  }
  return Statement(stmt, this);
}

Status Connection::copy_from(Connection& from) {
  sqlite3_backup* backup = sqlite3_backup_init(db_.get(), "main", from.raw(), "main");
  if (backup == nullptr) return last_error("copying '" + from.path() + "'");
  const int rc = sqlite3_backup_step(backup, -1);
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) return classify(rc, "copying '" + from.path() + "' failed");
  return ok_status();
}

Error Connection::last_error(const std::string& what) const {
  if (!db_) return io_error(what + ": out of memory");
  const int code = sqlite3_extended_errcode(db_.get());
  const std::string message = sqlite3_errmsg(db_.get());
  // A full disk is SQLITE_FULL, or an I/O error (SQLITE_IOERR_SHMSIZE, _WRITE, ...) whose
  // system error is ENOSPC: said as such, not as "disk I/O error".
  const int sys = sqlite3_system_errno(db_.get());
  if ((code & 0xff) == SQLITE_FULL ||
      ((code & 0xff) == SQLITE_IOERR && (sys == ENOSPC || sys == EDQUOT))) {
    return io_error("no space left on device writing '" + path_ + "' (" + message +
                    "); free some space there and run the command again");
  }
  return classify(code, what + ": " + message);
}

Statement& Statement::bind(int index, int64_t value) {
  if (sqlite3_bind_int64(stmt_.get(), index, value) != SQLITE_OK && !bind_error_) {
    bind_error_ = conn_->last_error("binding parameter " + std::to_string(index));
  }
  return *this;
}

Statement& Statement::bind(int index, double value) {
  if (sqlite3_bind_double(stmt_.get(), index, value) != SQLITE_OK && !bind_error_) {
    bind_error_ = conn_->last_error("binding parameter " + std::to_string(index));
  }
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  if (sqlite3_bind_text64(stmt_.get(), index, value.data(), value.size(), SQLITE_TRANSIENT,
                          SQLITE_UTF8) != SQLITE_OK &&
      !bind_error_) {
    bind_error_ = conn_->last_error("binding parameter " + std::to_string(index));
  }
  return *this;
}

Statement& Statement::bind_null(int index) {
  if (sqlite3_bind_null(stmt_.get(), index) != SQLITE_OK && !bind_error_) {
    bind_error_ = conn_->last_error("binding parameter " + std::to_string(index));
  }
  return *this;
}

Result<bool> Statement::step() {
  if (bind_error_) return *bind_error_;
  const int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const char* sql = sqlite3_sql(stmt_.get());
  return conn_->last_error("running '" + std::string(sql ? sql : "").substr(0, 40) + "'");
}

Status Statement::run() {
  while (true) {
    auto r = step();
    if (!r) return std::move(r).error();
    if (!*r) return ok_status();
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
  bind_error_.reset();
}

int64_t Statement::changes() const { return sqlite3_changes64(conn_->raw()); }

int64_t Statement::integer(int col) const { return sqlite3_column_int64(stmt_.get(), col); }
double Statement::real(int col) const { return sqlite3_column_double(stmt_.get(), col); }
bool Statement::is_null(int col) const {
  return sqlite3_column_type(stmt_.get(), col) == SQLITE_NULL;
}
std::string Statement::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_.get(), col);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_.get(), col)));
}

Result<Transaction> Transaction::begin(Connection& conn) {
  DLTUNE_TRY_CTX(conn.exec("BEGIN IMMEDIATE"), "starting a transaction on '" + conn.path() + "'");
  return Transaction(&conn);
}

Status Transaction::commit() {
  Connection* conn = conn_;
  conn_ = nullptr;
  if (conn == nullptr) return internal_error("commit of a finished transaction");
  if (auto s = conn->exec("COMMIT"); !s.ok()) {
    (void)conn->exec("ROLLBACK");  // best effort; the original error is what matters
    return std::move(s).error().wrap("committing to '" + conn->path() + "'");
  }
  return ok_status();
}

Transaction::~Transaction() {
  if (conn_ != nullptr) (void)conn_->exec("ROLLBACK");
}

}  // namespace dltune::tuner::db
