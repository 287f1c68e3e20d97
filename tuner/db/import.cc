// import_sources (bundle.h): reading, verifying and validating every source before the target
// database is touched, then merging them in order.
#include <string>
#include <vector>

#include "common/paths.h"
#include "tuner/db/bundle.h"

namespace dltune::tuner::db {
namespace {

// The target's settings when it exists (read-only: nothing is created to learn them).
Result<DbSettings> existing_settings(const std::string& db_path) {
  if (!paths::exists(db_path)) return DbSettings{};
  auto db = TuningDb::open(db_path, OpenMode::kReadOnly);
  if (!db) return std::move(db).error();
  return db->settings();
}

}  // namespace

Result<ImportOutcome> import_sources(const std::string& db_path,
                                     const std::vector<std::string>& paths,
                                     const ImportOptions& options) {
  ImportOutcome out;
  auto settings = existing_settings(db_path);
  if (!settings) return std::move(settings).error().wrap("reading the settings of the database");
  out.require_signature = options.require_signature || settings->require_signature;
  std::vector<PublicKey> trusted;
  for (const std::string& file : {options.trusted_keys, settings->trusted_keys}) {
    if (file.empty()) continue;
    auto keys = read_trusted_keys(file);
    if (!keys) return std::move(keys).error();
    for (PublicKey& k : *keys) {
      for (const PublicKey& t : trusted) {
        if (t.name == k.name && t.key != k.key) {
          return invalid_input("two different trusted keys are named '" + k.name + "' ('" + file +
                               "' and another trusted-keys file)");
        }
      }
      trusted.push_back(std::move(k));
    }
  }
  // Every source read, verified and checked before anything is written or created.
  for (const std::string& path : paths) {
    auto src = read_source(path, trusted);
    if (!src) return std::move(src).error();
    const Verification& v = src->verification;
    if (v.trust != Verification::Trust::kTrustedSigner) {
      if (out.require_signature) {
        return invalid_input("'" + path + "' is " + v.description +
                             ", and this database takes only bundles signed by a trusted key (" +
                             (options.require_signature ? std::string("--require-signature")
                                                        : "its require_signature setting") +
                             "); nothing was imported");
      }
      out.warnings.push_back("'" + path + "' is " + v.description +
                             ": its rows are imported marked unsigned");
    }
    const Bundle& b = src->bundle;
    DLTUNE_TRY_CTX(validate_rows(b.plans, b.measurements, b.recipe_trials), "'" + path + "'");
    out.sources.push_back(std::move(*src));
  }
  auto db = open_for_writing(db_path);
  if (!db) return std::move(db).error();
  // One transaction per source, in order, so that the policy also decides between sources.
  for (const Source& src : out.sources) {
    const Bundle& b = src.bundle;
    auto r = db->merge_rows(b.plans, b.measurements, options.policy, b.recipe_trials, src.path);
    if (!r) return std::move(r).error().wrap("merging '" + src.path + "' into '" + db_path + "'");
    for (auto [t, s] : {std::pair{&out.report.plans, &r->plans},
                        {&out.report.measurements, &r->measurements},
                        {&out.report.recipe_trials, &r->recipe_trials}}) {
      t->added += s->added;
      t->replaced += s->replaced;
      t->unchanged += s->unchanged;
      t->kept_local += s->kept_local;
    }
    for (PlanConflict& c : r->plan_conflicts) out.report.plan_conflicts.push_back(std::move(c));
  }
  return out;
}

}  // namespace dltune::tuner::db
