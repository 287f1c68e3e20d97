// import_sources (bundle.h): reading, verifying and validating every source before the target
// database is touched, then merging them in order.
#include <algorithm>
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

// What the database's own settings say about trust, for messages.
std::string own_trust(const DbSettings& s) {
  if (!s.trusted_keys.empty()) return "its trusted_keys setting, '" + s.trusted_keys + "'";
  return "its require_signature setting, with no trusted_keys file";
}

// The keys an import into a database with settings `s` trusts. A database that sets its own
// trust (a trusted_keys file, or require_signature on) was set up by whoever may write it, and
// an importing user's environment can only narrow that: DLTUNE_TRUSTED_KEYS (`env_file`) then
// keeps those of the database's keys it lists too and adds none (each key it would have added
// is a warning). A database that sets neither trusts what the environment names.
Result<std::vector<PublicKey>> trusted_keys_for(const DbSettings& s, const std::string& env_file,
                                                std::vector<std::string>* warnings) {
  std::vector<PublicKey> env;
  if (!env_file.empty()) {
    auto keys = read_trusted_keys(env_file);
    if (!keys) return std::move(keys).error().wrap("DLTUNE_TRUSTED_KEYS");
    env = std::move(*keys);
  }
  if (s.trusted_keys.empty() && !s.require_signature) return env;
  std::vector<PublicKey> own;
  if (!s.trusted_keys.empty()) {
    auto keys = read_trusted_keys(s.trusted_keys);
    if (!keys) return std::move(keys).error().wrap("the database's trusted_keys setting");
    own = std::move(*keys);
  }
  const auto same = [](const PublicKey& a, const PublicKey& b) {
    return a.name == b.name && a.key == b.key;
  };
  for (const PublicKey& k : env) {
    if (std::none_of(own.begin(), own.end(), [&](const PublicKey& o) { return same(o, k); })) {
      warnings->push_back("DLTUNE_TRUSTED_KEYS' key '" + k.name +
                          "' is not trusted by the database (" + own_trust(s) +
                          "): a user's environment cannot add keys to a database that sets its "
                          "own, so it is not trusted for this import");
    }
  }
  if (env_file.empty()) return own;
  std::erase_if(own, [&](const PublicKey& o) {
    return std::none_of(env.begin(), env.end(), [&](const PublicKey& k) { return same(o, k); });
  });
  return own;
}

}  // namespace

Result<ImportOutcome> import_sources(const std::string& db_path,
                                     const std::vector<std::string>& paths,
                                     const ImportOptions& options) {
  ImportOutcome out;
  auto settings = existing_settings(db_path);
  if (!settings) return std::move(settings).error().wrap("reading the settings of the database");
  out.require_signature = options.require_signature || settings->require_signature;
  auto trusted = trusted_keys_for(*settings, options.trusted_keys, &out.warnings);
  if (!trusted) return std::move(trusted).error();
  // Every source read, verified and checked before anything is written or created.
  for (const std::string& path : paths) {
    auto src = read_source(path, *trusted);
    if (!src) return std::move(src).error();
    const Verification& v = src->verification;
    if (v.trust != Verification::Trust::kTrustedSigner) {
      if (out.require_signature) {
        const bool no_keys = settings->require_signature && settings->trusted_keys.empty();
        return invalid_input(
            "'" + path + "' is " + v.description +
            ", and this database takes only bundles signed by a trusted key (" +
            (options.require_signature ? std::string("--require-signature")
                                       : "its require_signature setting") +
            "); nothing was imported" +
            (no_keys ? std::string(" (the database names no trusted keys: set them with dltune "
                                   "db settings --trusted-keys FILE)")
                     : std::string()));
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
