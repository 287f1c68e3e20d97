#include "launcher/flow/cost_fits.h"

#include "common/log.h"
#include "common/paths.h"
#include "tuner/db/store.h"

#include "predict/machine_comm.h"

namespace dltune::launcher {

namespace tdb = tuner::db;

std::vector<predict::LevelFit> store_level_fits(const std::string& db_path, const tdb::Key& key) {
  auto db = tdb::TuningDb::open(db_path, tdb::OpenMode::kReadWrite);
  if (!db) {
    DLTUNE_LOG(kWarn, "tuner") << "level fits: " << db.error().message();
    return {};
  }
  tdb::Filter f;
  f.fingerprint = key.fingerprint;
  auto rows = db->measurements(f);
  if (!rows) {
    DLTUNE_LOG(kWarn, "tuner") << "level fits: " << rows.error().message();
    return {};
  }
  const std::vector<predict::LevelFit> fits = predict::fit_all_levels(*rows);
  std::vector<tdb::CostModel> models;
  const tdb::Provenance prov = tdb::local_provenance();
  for (const predict::LevelFit& fit : fits) {
    tdb::CostModel m;
    m.key = key;
    m.key.recipe = "";
    m.key.shape = {fit.nodes, fit.ranks_per_node};
    m.level = fit.level;
    m.alpha_s = fit.link.alpha_s;
    m.beta_s_per_b = fit.link.beta_s_per_b;
    m.gamma_s_per_b = fit.link.gamma_s_per_b;
    m.rel_rms = fit.rel_rms;
    m.points = fit.points;
    m.provenance = prov;
    models.push_back(std::move(m));
  }
  if (Status s = db->put_cost_models(models); !s.ok()) {
    DLTUNE_LOG(kWarn, "tuner") << "level fits: " << s.error().message();
  }
  return fits;
}

predict::LevelFit level_fit_of(const tdb::CostModel& m) {
  predict::LevelFit lf;
  lf.level = m.level;
  lf.nodes = static_cast<int>(m.key.shape.nodes);
  lf.ranks_per_node = static_cast<int>(m.key.shape.ranks_per_node);
  lf.link = {m.alpha_s, m.beta_s_per_b, m.gamma_s_per_b};
  lf.rel_rms = m.rel_rms;
  lf.points = static_cast<int>(m.points);
  return lf;
}

std::vector<predict::LevelFit> stored_level_fits(const std::string& db_path,
                                                 const std::string& fingerprint) {
  if (db_path.empty() || !paths::exists(db_path)) return {};
  auto db = tdb::TuningDb::open(db_path, tdb::OpenMode::kReadOnly);
  if (!db) return {};
  tdb::Filter f;
  f.fingerprint = fingerprint;
  std::vector<predict::LevelFit> fits;
  if (auto models = db->cost_models(f)) {
    for (const tdb::CostModel& m : *models) fits.push_back(level_fit_of(m));
  }
  if (!fits.empty()) return fits;
  auto rows = db->measurements(f);
  return rows ? predict::fit_all_levels(*rows) : fits;
}

}  // namespace dltune::launcher
