#include "tuner/db/lookup.h"

#include <cmath>
#include <string>

#include "common/env.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/strings.h"
#include "tuner/db/store.h"

namespace dltune::tuner::db {
namespace {

std::string shape_text(const JobShape& s) {
  return std::to_string(s.nodes) + "x" + std::to_string(s.ranks_per_node);
}

void diff(std::vector<std::string>& out, const char* what, const std::string& want,
          const std::string& got) {
  if (want != got) out.push_back(std::string(what) + " " + got + " (wanted " + want + ")");
}

// One layer's candidates: the exact hit, else the closest near hit.
struct LayerHit {
  std::optional<PlanRecord> exact;
  std::optional<PlanRecord> near;
};

Result<LayerHit> search(TuningDb& db, const Key& key) {
  LayerHit hit;
  auto exact = db.find_exact(key);
  if (!exact) return std::move(exact).error();
  hit.exact = std::move(*exact);
  if (hit.exact) return hit;
  auto family = db.find_family(key.family, key.recipe);
  if (!family) return std::move(family).error();
  double best = 0;
  for (PlanRecord& p : *family) {
    const double d = near_distance(key, p);
    if (!hit.near || d < best) {
      best = d;
      hit.near = std::move(p);
    }
  }
  return hit;
}

}  // namespace

const char* hit_kind_name(HitKind kind) {
  switch (kind) {
    case HitKind::kExact:
      return "exact";
    case HitKind::kNear:
      return "near";
    case HitKind::kMiss:
      break;
  }
  return "miss";
}

Result<Layers> layers_from_env(const std::optional<std::string>& db_flag) {
  Layers layers;
  if (db_flag && !db_flag->empty()) {
    layers.user_db = *db_flag;
  } else {
    auto user = paths::user_db();  // honours DLTUNE_DB
    if (!user) return std::move(user).error().wrap("finding the user tuning database");
    layers.user_db = *user;
  }
  for (std::string& s : strings::split(env::get(env::kSiteDb), ':')) {
    if (!s.empty()) layers.site_dbs.push_back(std::move(s));
  }
  return layers;
}

std::vector<std::string> describe_differences(const Key& want, const Key& got) {
  std::vector<std::string> out;
  diff(out, "fingerprint", want.fingerprint, got.fingerprint);
  diff(out, "job shape", shape_text(want.shape), shape_text(got.shape));
  diff(out, "MPI", want.versions.mpi, got.versions.mpi);
  diff(out, "PMIx", want.versions.pmix, got.versions.pmix);
  diff(out, "NCCL", want.versions.nccl, got.versions.nccl);
  diff(out, "dltune", want.versions.dltune, got.versions.dltune);
  return out;
}

double near_distance(const Key& want, const PlanRecord& c) {
  double d = 0;
  if (!(c.key.versions == want.versions)) d += 1000;
  if (c.key.fingerprint != want.fingerprint) d += 100;
  if (c.key.shape.nodes != want.shape.nodes) d += 10;
  const double ratio =
      static_cast<double>(c.key.shape.ranks()) / static_cast<double>(want.shape.ranks());
  d += std::min(9.0, std::fabs(std::log2(ratio)));
  // Newer first among otherwise equal candidates (created_at in (0, 2^35) -> (0, 1)).
  d += 1.0 - static_cast<double>(c.provenance.created_at) / 34359738368.0;
  return d;
}

Result<LookupResult> lookup_plan(const Layers& layers, const Key& key) {
  LookupResult result;
  std::optional<LookupResult> first_near;
  auto consider = [&](TuningDb& db, bool site) -> Result<bool> {
    auto hit = search(db, key);
    if (!hit) return std::move(hit).error();
    const auto fill = [&](HitKind kind, PlanRecord plan) {
      LookupResult r;
      r.kind = kind;
      r.site = plan.provenance.site;
      if (kind == HitKind::kNear) r.differences = describe_differences(key, plan.key);
      r.plan = std::move(plan);
      r.db_path = db.path();
      r.from_site = site;
      return r;
    };
    if (hit->exact) {
      auto warnings = std::move(result.warnings);
      result = fill(HitKind::kExact, std::move(*hit->exact));
      result.warnings = std::move(warnings);
      return true;
    }
    if (hit->near && !first_near) first_near = fill(HitKind::kNear, std::move(*hit->near));
    return false;
  };

  if (!layers.user_db.empty() && paths::exists(layers.user_db)) {
    auto db = TuningDb::open(layers.user_db, OpenMode::kReadOnly);  // a look-up only reads
    if (!db) return std::move(db).error().wrap("reading the user tuning database");
    auto done = consider(*db, false);
    if (!done) return std::move(done).error().wrap("reading '" + layers.user_db + "'");
    if (*done) return result;
  }
  for (const std::string& path : layers.site_dbs) {
    auto db = TuningDb::open(path, OpenMode::kReadOnly);
    auto done = db ? consider(*db, true) : Result<bool>(std::move(db).error());
    if (!done) {
      // Said once, by the caller (a launch's notes, tune's and db lookup's stderr, a plugin's
      // log): logged here too, it printed twice.
      result.warnings.push_back("site database skipped: " + done.error().message());
      DLTUNE_LOG(kInfo, "db") << result.warnings.back();
      continue;
    }
    if (*done) return result;
  }
  if (first_near) {
    first_near->warnings = std::move(result.warnings);
    return std::move(*first_near);
  }
  return result;
}

}  // namespace dltune::tuner::db
