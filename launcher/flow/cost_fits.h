// The per-level cost models (predict/level_fit.h) of this machine in the tuning database:
// refitted from every stored sweep of the machine after a sweep is stored, so that
// `dltune predict` and the launch summary find alpha, beta and gamma of each level with their
// fit error for every shape the tuner saw.
#pragma once

#include <string>
#include <vector>

#include "tuner/db/records.h"

#include "predict/level_fit.h"

namespace dltune::launcher {

// Refits every shape of `key`'s fingerprint found in `db_path` and stores the fits under `key`
// with each fit's shape. Failures are logged (a prediction is not worth failing a tuning run
// for); returns the fits.
std::vector<predict::LevelFit> store_level_fits(const std::string& db_path,
                                                const tuner::db::Key& key);

// A stored cost model as the predictor's LevelFit.
predict::LevelFit level_fit_of(const tuner::db::CostModel& m);

// The machine's level fits as stored in `db_path` (read-only), else fitted now from its sweeps;
// empty when the database has neither.
std::vector<predict::LevelFit> stored_level_fits(const std::string& db_path,
                                                 const std::string& fingerprint);

}  // namespace dltune::launcher
