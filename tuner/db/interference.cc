// Measured interference in the tuning database (schema v8): writing a measurement and reading
// the ones a prediction of the same work can use.
#include <string>

#include <nlohmann/json.hpp>

#include "tuner/db/store.h"
#include "tuner/db/store_sql.h"

#define DLTUNE_DB_INTERFERENCE_COLS \
  DLTUNE_DB_KEY_COLS                \
  ", threads, batch, points_json, source, " DLTUNE_DB_PROV_COLS

namespace dltune::tuner::db {

using detail::bind_key;
using detail::bind_provenance;
using detail::read_key;
using detail::read_provenance;

namespace {

// [[bytes, compute, compute_low, compute_high, comm, comm_low, comm_high], ...]: numbers only,
// so that what another program wrote into the column is read or refused, never interpreted.
std::string points_text(const std::vector<InterferenceRecord::Point>& points) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : points) {
    a.push_back(
        {p.bytes, p.compute, p.compute_low, p.compute_high, p.comm, p.comm_low, p.comm_high});
  }
  return a.dump();
}

Result<std::vector<InterferenceRecord::Point>> parse_points(const std::string& text) {
  auto bad = [] {
    return invalid_input("interference.points_json: not an array of 7 numbers each");
  };
  if (text.size() > 64 * 1024) return bad();
  const nlohmann::json a = nlohmann::json::parse(text, nullptr, false);
  if (!a.is_array() || a.size() > kMaxInterferencePoints) return bad();
  std::vector<InterferenceRecord::Point> out;
  for (const auto& row : a) {
    if (!row.is_array() || row.size() != 7) return bad();
    double v[7];
    for (size_t i = 0; i < 7; ++i) {
      if (!row[i].is_number()) return bad();
      v[i] = row[i].get<double>();
    }
    out.push_back({v[0], v[1], v[2], v[3], v[4], v[5], v[6]});
  }
  return out;
}

}  // namespace

Status TuningDb::put_interference(const InterferenceRecord& r) {
  DLTUNE_TRY(check_writable());
  DLTUNE_TRY_CTX(validate_interference(r), "storing a measured interference");
  auto st = connection().prepare(
      "INSERT INTO interference(" DLTUNE_DB_INTERFERENCE_COLS
      ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
      "?19) "
      "ON CONFLICT(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, threads, "
      "batch) DO UPDATE SET family = excluded.family, points_json = excluded.points_json, "
      "source = excluded.source, site = excluded.site, host = excluded.host, "
      "user_name = excluded.user_name, writer_version = excluded.writer_version, "
      "created_at = excluded.created_at, signed_by = excluded.signed_by");
  if (!st) return std::move(st).error();
  bind_key(*st, 1, r.key, true);
  st->bind(10, r.threads).bind(11, r.batch).bind(12, points_text(r.points)).bind(13, r.source);
  bind_provenance(*st, 14, r.provenance);
  DLTUNE_TRY_CTX(st->run(), "storing a measured interference in '" + path_ + "'");
  row_written(1);
  return ok_status();
}

Result<std::vector<InterferenceRecord>> TuningDb::interference(const Key& key) {
  auto st = connection().prepare("SELECT " DLTUNE_DB_INTERFERENCE_COLS
                                 " FROM interference WHERE " DLTUNE_DB_IDENTITY_WHERE
                                 " ORDER BY threads, batch");
  if (!st) return std::move(st).error();
  bind_key(*st, 1, key, false);
  std::vector<InterferenceRecord> out;
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) return out;
    InterferenceRecord r;
    r.key = read_key(*st, 0);
    r.threads = st->integer(9);
    r.batch = st->integer(10);
    auto points = parse_points(st->text(11));
    r.source = st->text(12);
    r.provenance = read_provenance(*st, 13);
    // A row another program wrote into the file is refused as an import would be.
    const std::string where = "the measured interference stored in '" + path_ + "'";
    if (!points) return std::move(points).error().wrap(where);
    r.points = std::move(*points);
    DLTUNE_TRY_CTX(validate_interference(r), where);
    out.push_back(std::move(r));
  }
}

}  // namespace dltune::tuner::db
