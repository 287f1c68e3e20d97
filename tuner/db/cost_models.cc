// Per-level cost models in the tuning database (schema v5): writing and reading.
#include <string>

#include "tuner/db/store.h"
#include "tuner/db/store_sql.h"

#define DLTUNE_DB_COST_COLS \
  DLTUNE_DB_KEY_COLS        \
  ", level, alpha_s, beta_s_per_b, gamma_s_per_b, rel_rms, points, " DLTUNE_DB_PROV_COLS

namespace dltune::tuner::db {

using detail::bind_filter;
using detail::bind_key;
using detail::bind_provenance;
using detail::read_key;
using detail::read_provenance;

Status TuningDb::put_cost_models(std::span<const CostModel> models) {
  DLTUNE_TRY(check_writable());
  for (const CostModel& c : models) DLTUNE_TRY_CTX(validate_cost_model(c), "storing a cost model");
  auto tx = Transaction::begin(connection());
  if (!tx) return std::move(tx).error();
  int64_t n = 0;
  for (const CostModel& c : models) {
    auto st = connection().prepare(
        "INSERT INTO cost_models(" DLTUNE_DB_COST_COLS
        ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
        "?18, ?19, ?20, ?21) "
        "ON CONFLICT(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, level) "
        "DO UPDATE SET family = excluded.family, alpha_s = excluded.alpha_s, "
        "beta_s_per_b = excluded.beta_s_per_b, gamma_s_per_b = excluded.gamma_s_per_b, "
        "rel_rms = excluded.rel_rms, points = excluded.points, site = excluded.site, "
        "host = excluded.host, user_name = excluded.user_name, "
        "writer_version = excluded.writer_version, created_at = excluded.created_at, "
        "signed_by = excluded.signed_by");
    if (!st) return std::move(st).error();
    bind_key(*st, 1, c.key, true);
    st->bind(10, c.level)
        .bind(11, c.alpha_s)
        .bind(12, c.beta_s_per_b)
        .bind(13, c.gamma_s_per_b)
        .bind(14, c.rel_rms)
        .bind(15, c.points);
    bind_provenance(*st, 16, c.provenance);
    DLTUNE_TRY_CTX(st->run(), "storing a cost model in '" + path_ + "'");
    row_written(++n);
  }
  return tx->commit();
}

Result<std::vector<CostModel>> TuningDb::cost_models(const Filter& filter) {
  auto st = connection().prepare("SELECT " DLTUNE_DB_COST_COLS
                                 " FROM cost_models" DLTUNE_DB_FILTER_WHERE " ORDER BY id");
  if (!st) return std::move(st).error();
  bind_filter(*st, filter);
  std::vector<CostModel> out;
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) return out;
    CostModel c;
    c.key = read_key(*st, 0);
    c.level = st->text(9);
    c.alpha_s = st->real(10);
    c.beta_s_per_b = st->real(11);
    c.gamma_s_per_b = st->real(12);
    c.rel_rms = st->real(13);
    c.points = st->integer(14);
    c.provenance = read_provenance(*st, 15);
    out.push_back(std::move(c));
  }
}

}  // namespace dltune::tuner::db
