// The scaling efficiency's 1-rank baselines in the tuning database (schema v7): writing one and
// finding the one a launch can reuse.
#include <string>

#include "tuner/db/store.h"
#include "tuner/db/store_sql.h"

#define DLTUNE_DB_BASELINE_COLS \
  DLTUNE_DB_KEY_COLS            \
  ", plan_hash, bind, samples_per_s, steps, rel_ci, seconds, " DLTUNE_DB_PROV_COLS

namespace dltune::tuner::db {

using detail::bind_key;
using detail::bind_provenance;
using detail::read_key;
using detail::read_provenance;

Status TuningDb::put_baseline(const BaselineRecord& b) {
  DLTUNE_TRY(check_writable());
  DLTUNE_TRY_CTX(validate_baseline(b), "storing a 1-rank baseline");
  auto st = connection().prepare(
      "INSERT INTO baselines(" DLTUNE_DB_BASELINE_COLS
      ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
      "?19, ?20, ?21) "
      "ON CONFLICT(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, plan_hash, "
      "bind) DO UPDATE SET family = excluded.family, samples_per_s = excluded.samples_per_s, "
      "steps = excluded.steps, rel_ci = excluded.rel_ci, seconds = excluded.seconds, "
      "site = excluded.site, host = excluded.host, user_name = excluded.user_name, "
      "writer_version = excluded.writer_version, created_at = excluded.created_at, "
      "signed_by = excluded.signed_by");
  if (!st) return std::move(st).error();
  bind_key(*st, 1, b.key, true);
  st->bind(10, b.plan_hash)
      .bind(11, b.bind)
      .bind(12, b.samples_per_s)
      .bind(13, b.steps)
      .bind(14, b.rel_ci)
      .bind(15, b.seconds);
  bind_provenance(*st, 16, b.provenance);
  DLTUNE_TRY_CTX(st->run(), "storing a 1-rank baseline in '" + path_ + "'");
  row_written(1);
  return ok_status();
}

Result<std::optional<BaselineRecord>> TuningDb::find_baseline(const Key& key,
                                                              const std::string& plan_hash,
                                                              const std::string& bind) {
  auto st = connection().prepare("SELECT " DLTUNE_DB_BASELINE_COLS
                                 " FROM baselines WHERE " DLTUNE_DB_IDENTITY_WHERE
                                 " AND plan_hash = ?9 AND bind = ?10");
  if (!st) return std::move(st).error();
  bind_key(*st, 1, key, false);
  st->bind(9, plan_hash).bind(10, bind);
  auto row = st->step();
  if (!row) return std::move(row).error();
  if (!*row) return std::optional<BaselineRecord>();
  BaselineRecord b;
  b.key = read_key(*st, 0);
  b.plan_hash = st->text(9);
  b.bind = st->text(10);
  b.samples_per_s = st->real(11);
  b.steps = st->integer(12);
  b.rel_ci = st->real(13);
  b.seconds = st->real(14);
  b.provenance = read_provenance(*st, 15);
  // A row another program wrote into the file is refused as an import would be.
  DLTUNE_TRY_CTX(validate_baseline(b), "the 1-rank baseline stored in '" + path_ + "'");
  return std::optional<BaselineRecord>(std::move(b));
}

}  // namespace dltune::tuner::db
