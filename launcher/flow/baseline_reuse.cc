#include "launcher/flow/baseline_reuse.h"

#include <cmath>

#include "common/hash.h"
#include "common/paths.h"
#include "recipes/recipe.h"
#include "tuner/db/key.h"
#include "tuner/db/store.h"

namespace dltune::launcher {

namespace tdb = tuner::db;

BaselineIdentity measured_plan_identity(const topology::Topology& topo, const Job& job,
                                        const recipes::Plan& plan) {
  // What the ranks run, less what does not change its speed: who tuned it and when, the
  // learning-rate settings (made negligible) and the layout's description.
  recipes::Plan run = plan;
  run.provenance = {};
  run.training.lr_scale = 1.0;
  run.training.warmup_steps = 0;
  // The layout's own words and figures describe it; they do not change what runs.
  run.parallel.reason.clear();
  run.parallel.memory_bytes = 0;
  run.parallel.predicted_sps = run.parallel.measured_sps = 0;
  // The recipe's learning rate is in its signature (the tuner's trials depend on it); the
  // measurement runs at a negligible one of its own (measure_throughput), so any rate signs
  // alike.
  recipes::Recipe recipe = job.recipe;
  recipe.training.optimizer.lr = 1e-12;
  BaselineIdentity id;
  id.key = tdb::make_key(topo, tdb::JobShape{run.job.nodes, run.job.ranks_per_node},
                         recipes::recipe_signature(recipe), false);
  id.plan_hash = sha256_hex(recipes::serialize_plan(run) + "\ndata " + job.recipe.data.path);
  id.bind = job.recipe.launch.binding.empty() ? "auto" : job.recipe.launch.binding;
  return id;
}

BaselineIdentity baseline_identity(const topology::Topology& topo, const Job& job,
                                   const recipes::Plan& plan) {
  recipes::Plan one = baseline_plan(plan);
  one.collectives.clear();  // one rank sends nothing
  return measured_plan_identity(topo, job, one);
}

Result<std::optional<Baseline>> stored_baseline(const std::string& db_path,
                                                const BaselineIdentity& id, double max_rel_ci) {
  if (db_path.empty() || !paths::exists(db_path)) return std::optional<Baseline>();
  auto db = tdb::TuningDb::open(db_path, tdb::OpenMode::kReadOnly);
  if (!db) return std::move(db).error();
  auto row = db->find_baseline(id.key, id.plan_hash, id.bind);
  if (!row) return std::move(row).error();
  if (!row->has_value() || !((*row)->rel_ci <= max_rel_ci)) return std::optional<Baseline>();
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
