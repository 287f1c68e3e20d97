#include "launcher/flow/baseline_reuse.h"

#include <cmath>

#include "common/hash.h"
#include "common/paths.h"
#include "recipes/recipe.h"
#include "tuner/db/key.h"
#include "tuner/db/store.h"

namespace dltune::launcher {

namespace tdb = tuner::db;

BaselineIdentity baseline_identity(const topology::Topology& topo, const Job& job,
                                   const recipes::Plan& plan) {
  // What one rank runs, less what does not change its speed: who tuned it and when, the
  // collective rules (nothing to send), the learning-rate settings (made negligible) and the
  // layout's description.
  recipes::Plan one = baseline_plan(plan);
  one.provenance = {};
  one.collectives.clear();
  one.training.lr_scale = 1.0;
  one.training.warmup_steps = 0;
  // The layout's own words and figures describe it; they do not change what runs.
  one.parallel.reason.clear();
  one.parallel.memory_bytes = 0;
  one.parallel.predicted_sps = one.parallel.measured_sps = 0;
  // The recipe's learning rate is in its signature (the tuner's trials depend on it); the
  // baseline runs at a negligible one of its own (measure_baseline), so any rate signs alike.
  recipes::Recipe recipe = job.recipe;
  recipe.training.optimizer.lr = 1e-12;
  BaselineIdentity id;
  id.key = tdb::make_key(topo, tdb::JobShape{1, 1}, recipes::recipe_signature(recipe), false);
  id.plan_hash = sha256_hex(recipes::serialize_plan(one) + "\ndata " + job.recipe.data.path);
  id.bind = job.recipe.launch.binding.empty() ? "auto" : job.recipe.launch.binding;
  return id;
}

Result<std::optional<Baseline>> stored_baseline(const std::string& db_path,
                                                const BaselineIdentity& id) {
  if (db_path.empty() || !paths::exists(db_path)) return std::optional<Baseline>();
  auto db = tdb::TuningDb::open(db_path, tdb::OpenMode::kReadOnly);
  if (!db) return std::move(db).error();
  auto row = db->find_baseline(id.key, id.plan_hash, id.bind);
  if (!row) return std::move(row).error();
  if (!row->has_value() || !((*row)->rel_ci <= kBaselineRelCi)) return std::optional<Baseline>();
  const tdb::BaselineRecord& r = **row;
  Baseline b;
  b.sps = r.samples_per_s;
  b.steps = r.steps;
  b.rel_ci = r.rel_ci;
  b.bind = r.bind;
  b.seconds = r.seconds;
  b.measured_at = r.provenance.created_at;
  b.measured_on = r.provenance.host;
  return std::optional<Baseline>(b);
}

Status store_baseline(const std::string& db_path, const BaselineIdentity& id, const Baseline& b) {
  tdb::BaselineRecord r;
  r.key = id.key;
  r.plan_hash = id.plan_hash;
  r.bind = id.bind;
  r.samples_per_s = b.sps;
  r.steps = b.steps;
  r.rel_ci = b.rel_ci;
  r.seconds = b.seconds;
  r.provenance = tdb::local_provenance();
  auto db = tdb::open_for_writing(db_path);
  if (!db) return std::move(db).error();
  return db->put_baseline(r);
}

}  // namespace dltune::launcher
