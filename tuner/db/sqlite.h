// A thin RAII layer over SQLite 3: a Connection owns a sqlite3*, a Statement owns a prepared
// sqlite3_stmt*, a Transaction rolls back unless committed. Every value reaches SQL through a
// bound parameter (Statement::bind); SQL text is always a compile-time constant.
//
//   DLTUNE_TRY(auto conn, ...);  // see store.h for the real users
//   auto st = conn.prepare("SELECT plan_json FROM plans WHERE fingerprint = ?1");
//   st->bind(1, fingerprint);
//   while (*st->step()) use(st->text(0));
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <sqlite3.h>

#include "common/result.h"

namespace dltune::tuner::db {

enum class OpenMode {
  kReadWrite,  // create when missing, WAL journal, busy timeout
  kReadOnly,   // never written; a WAL file we may not write is opened as immutable
};

class Statement;

class Connection {
 public:
  // Opens `path`. kReadWrite creates the file (and not its directory), switches to WAL and sets
  // the busy timeout, so concurrent writers wait instead of failing. kReadOnly fails with
  // not_found when the file is missing. Errors name the path.
  static Result<Connection> open(const std::string& path, OpenMode mode,
                                 int busy_timeout_ms = 15000);
  // A private in-memory database (used to upgrade read-only databases of older schemas).
  static Result<Connection> open_memory();

  // Runs constant SQL with no parameters (schema statements, pragmas). Never pass built text.
  Status exec(const char* sql);
  // Prepares one statement; the error names the SQL's first words.
  Result<Statement> prepare(std::string_view sql);
  // Copies the whole database `from` into this one (sqlite3_backup); this one is replaced.
  Status copy_from(Connection& from);

  // An Error built from the connection's last SQLite error, prefixed with `what`. BUSY/LOCKED
  // become timeout errors, CORRUPT/NOTADB invalid input, the rest I/O errors; a full disk
  // (SQLITE_FULL, or an I/O error whose system error is ENOSPC or EDQUOT) is the I/O error "no
  // space left on device writing 'PATH' (...)".
  Error last_error(const std::string& what) const;

  sqlite3* raw() const { return db_.get(); }
  const std::string& path() const { return path_; }
  bool read_only() const { return read_only_; }

 private:
  struct Closer {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  };
  std::unique_ptr<sqlite3, Closer> db_;
  std::string path_;
  bool read_only_ = false;
};

class Statement {
 public:
  // Binding never fails loudly here: the first bind error is kept and returned by step().
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, const std::string& value) {
    return bind(index, std::string_view(value));
  }
  Statement& bind_null(int index);

  // Advances: true when a row is available, false when done; an error otherwise.
  Result<bool> step();
  // Steps to completion, ignoring rows (INSERT / UPDATE / DELETE).
  Status run();
  // Makes the statement reusable with new bindings.
  void reset();
  // Rows changed by the last completed INSERT / UPDATE / DELETE on this connection.
  int64_t changes() const;

  // Column accessors for the current row (0-based). NULL reads as 0 / "".
  int64_t integer(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  bool is_null(int col) const;

 private:
  friend class Connection;
  struct Finalizer {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  Statement(sqlite3_stmt* stmt, const Connection* conn) : stmt_(stmt), conn_(conn) {}
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
  const Connection* conn_;
  std::optional<Error> bind_error_;
};

// BEGIN IMMEDIATE ... COMMIT. The destructor rolls back a transaction that was not committed,
// so an early return on error leaves the database as it was.
class Transaction {
 public:
  static Result<Transaction> begin(Connection& conn);
  Status commit();
  ~Transaction();
  Transaction(Transaction&& other) noexcept : conn_(other.conn_) { other.conn_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;

 private:
  explicit Transaction(Connection* conn) : conn_(conn) {}
  Connection* conn_;
};

}  // namespace dltune::tuner::db
