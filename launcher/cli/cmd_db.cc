// `dltune db`: show, export, import, merge, prune, rules and lookup over the tuning databases
// (tuner/db). Bad input exits 2 with one sentence; nothing is written when an input is bad.
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/json_input.h"
#include "common/paths.h"
#include "common/strings.h"
#include "launcher/cli/commands.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"
#include "topology/topology.h"
#include "tuner/db/admin.h"
#include "tuner/db/bundle.h"
#include "tuner/db/key.h"
#include "tuner/db/lookup.h"
#include "tuner/db/rules_export.h"
#include "tuner/db/signing.h"
#include "tuner/db/store.h"

#include "dltune/config.h"

namespace dltune::cli {
namespace {

namespace tdb = tuner::db;

struct DbOptions {
  std::string db;  // --db: the user database (default DLTUNE_DB, then the XDG path)
  bool json = false;
  std::string output;
  std::string site;
  std::string policy = "keep-local";
  std::vector<std::string> inputs;
  // Filters.
  std::string fingerprint, family, recipe, shape, dltune_version;
  // prune
  std::string older_than;
  bool other_versions = false;
  // rules
  std::string format = "ompi";
  // lookup
  std::string mpi, pmix, nccl;
  // signatures: export --sign, import/merge --require-signature, keygen, settings
  std::string sign_key;
  bool require_signature = false;
  std::string name;
  std::string set_require_signature;  // "on" | "off" | "" (unchanged)
  std::optional<std::string> set_trusted_keys;
};

Result<tdb::Layers> layers(const DbOptions& o) {
  return tdb::layers_from_env(o.db.empty() ? std::nullopt : std::optional<std::string>(o.db));
}

// Opens the user database for writing, creating its directory when needed.
Result<tdb::TuningDb> open_user(const DbOptions& o) {
  auto l = layers(o);
  if (!l) return std::move(l).error();
  return tdb::open_for_writing(l->user_db);
}

// Opens the user database to read it only: never created, never written (a read-only
// database serves every command that only reads).
Result<tdb::TuningDb> open_user_to_read(const DbOptions& o) {
  auto l = layers(o);
  if (!l) return std::move(l).error();
  if (!paths::exists(l->user_db)) {
    return not_found("the user database '" + l->user_db +
                     "' does not exist yet (created by the first tuning run or import)");
  }
  return tdb::TuningDb::open(l->user_db, tdb::OpenMode::kReadOnly);
}

Result<tdb::Filter> filter_from(const DbOptions& o) {
  tdb::Filter f;
  if (!o.fingerprint.empty()) f.fingerprint = o.fingerprint;
  if (!o.family.empty()) f.family = o.family;
  if (!o.recipe.empty()) f.recipe = o.recipe;
  if (!o.dltune_version.empty()) f.dltune_version = o.dltune_version;
  if (!o.shape.empty()) {
    auto s = tdb::parse_shape(o.shape);
    if (!s) return std::move(s).error().wrap("--shape");
    f.shape = *s;
  }
  return f;
}

void add_filters(CLI::App* cmd, DbOptions& o) {
  cmd->add_option("--fingerprint", o.fingerprint, "Only rows of this topology fingerprint");
  cmd->add_option("--family", o.family, "Only rows of this topology family");
  cmd->add_option("--recipe", o.recipe, "Only rows of this recipe signature");
  cmd->add_option("--shape", o.shape, "Only rows of this job shape: NODESxRANKS_PER_NODE or RANKS");
  cmd->add_option("--dltune-version", o.dltune_version, "Only rows measured with this dltune");
}

std::string counts_text(const tdb::MergeCounts& c) {
  return std::to_string(c.added) + " added, " + std::to_string(c.replaced) + " replaced, " +
         std::to_string(c.unchanged) + " unchanged, " + std::to_string(c.kept_local) +
         " kept local";
}

// A plan row's side of a conflict, as JSON.
nlohmann::json side_json(const tdb::PlanRecord& p) {
  const auto& v = p.provenance;
  return {{"site", v.site},           {"host", v.host},
          {"user", v.user},           {"created_at", v.created_at},
          {"signed_by", v.signed_by}, {"plan", tdb::plan_summary(p.plan_json)}};
}

// "site A, 2024-05-01T10:00:00Z, signed by A: b64 weak bucket=4MiB overlap, allreduce ring".
std::string side_text(const tdb::PlanRecord& p) {
  const auto& v = p.provenance;
  return (v.site.empty() ? std::string("local") : "site " + v.site) + ", " +
         tdb::utc_time(v.created_at) + ", " +
         (v.signed_by.empty()             ? std::string("made here")
          : v.signed_by == tdb::kUnsigned ? std::string("unsigned")
                                          : "signed by " + v.signed_by) +
         ": " + tdb::plan_summary(p.plan_json);
}

std::string key_text(const tdb::Key& k) {
  return "fingerprint " + k.fingerprint.substr(0, 12) + " shape " + std::to_string(k.shape.nodes) +
         "x" + std::to_string(k.shape.ranks_per_node) + " recipe " +
         (k.recipe.empty() ? std::string("(collectives)") : k.recipe.substr(0, 12)) + " mpi " +
         (k.versions.mpi.empty() ? "-" : k.versions.mpi) + " nccl " +
         (k.versions.nccl.empty() ? "-" : k.versions.nccl) + " dltune " + k.versions.dltune;
}

void print_report(const char* verb, const tdb::MergeReport& r, bool json) {
  if (json) {
    auto c = [](const tdb::MergeCounts& m) {
      return nlohmann::json{{"added", m.added},
                            {"replaced", m.replaced},
                            {"unchanged", m.unchanged},
                            {"kept_local", m.kept_local}};
    };
    nlohmann::json conflicts = nlohmann::json::array();
    for (const tdb::PlanConflict& x : r.plan_conflicts) {
      conflicts.push_back({{"key", key_text(x.local.key)},
                           {"fingerprint", x.local.key.fingerprint},
                           {"recipe", x.local.key.recipe},
                           {"nodes", x.local.key.shape.nodes},
                           {"ranks_per_node", x.local.key.shape.ranks_per_node},
                           {"local", side_json(x.local)},
                           {"incoming", side_json(x.incoming)},
                           {"source", x.source},
                           {"winner", x.incoming_won ? "incoming" : "local"},
                           {"why", x.why}});
    }
    std::printf("%s\n", nlohmann::json{{"plans", c(r.plans)},
                                       {"measurements", c(r.measurements)},
                                       {"recipe_trials", c(r.recipe_trials)},
                                       {"plan_conflicts", conflicts}}
                            .dump()
                            .c_str());
    return;
  }
  std::printf("%s: plans %s; measurements %s; recipe trials %s\n", verb,
              counts_text(r.plans).c_str(), counts_text(r.measurements).c_str(),
              counts_text(r.recipe_trials).c_str());
  // Every plan conflict, by plan: both sides, which won and why (printable: the rows came from
  // outside).
  for (const tdb::PlanConflict& x : r.plan_conflicts) {
    const std::string text =
        "conflict: plan " + key_text(x.local.key) + "\n  local:    " + side_text(x.local) +
        "\n  incoming: " + side_text(x.incoming) +
        (x.source.empty() ? "" : " (from " + x.source + ")") + "\n  " +
        (x.incoming_won ? "replaced by the incoming plan" : "kept the local plan") + ": " + x.why +
        "\n";
    std::printf("%s", strings::printable(text).c_str());
  }
}

// Names the recipes of the plans in `s` ("recipe_name"): the name the plan recorded when it
// was tuned, else the bundled recipes whose signature it is.
void name_recipes(nlohmann::json& s) {
  if (!s.contains("plans")) return;
  std::map<std::string, std::string> bundled;  // signature -> names
  bool listed = false;
  for (nlohmann::json& p : s["plans"]) {
    const std::string sig = p["key"].value("recipe", "");
    if (sig.empty()) continue;
    const nlohmann::json& plan = p["plan"];
    if (plan.is_object() && plan.contains("provenance") &&
        !plan["provenance"].value("recipe", "").empty()) {
      p["recipe_name"] = plan["provenance"].value("recipe", "");
      continue;
    }
    if (!listed) {
      for (const auto& b : recipes::list_bundled_recipes()) {
        recipes::ParseOutcome r = recipes::parse_recipe_file(b.path);
        // A recipe whose data files are missing still has its model: its signature counts.
        std::string& names = bundled[recipes::recipe_signature(r.recipe)];
        names += (names.empty() ? "" : ", ") + b.name;
      }
      listed = true;
    }
    auto it = bundled.find(sig);
    if (it != bundled.end()) p["recipe_name"] = it->second;
  }
}

Status run_show(const DbOptions& o) {
  auto l = layers(o);
  if (!l) return std::move(l).error();
  nlohmann::json s = tdb::summarize(*l, true);
  name_recipes(s);
  std::printf("%s", o.json ? (s.dump(1) + "\n").c_str() : tdb::summary_text(s).c_str());
  // A database that exists but cannot be read is a failure, after showing the others.
  for (const auto& d : s["databases"]) {
    if (!d.contains("error") || (d["layer"] == "user" && !paths::exists(d["path"]))) continue;
    return invalid_input("cannot show every database: " + d["error"].get<std::string>());
  }
  return ok_status();
}

Status run_export(const DbOptions& o) {
  auto f = filter_from(o);
  if (!f) return std::move(f).error();
  std::optional<tdb::SecretKey> key;
  if (!o.sign_key.empty()) {
    auto k = tdb::read_secret_key(o.sign_key);
    if (!k) return std::move(k).error().wrap("--sign");
    key = std::move(*k);
  }
  auto db = open_user_to_read(o);
  if (!db) return std::move(db).error();
  auto b = tdb::export_bundle(*db, *f, o.site);
  if (!b) return std::move(b).error();
  DLTUNE_TRY(paths::write_file_atomic(o.output, tdb::bundle_to_json(*b, key ? &*key : nullptr)));
  std::fprintf(
      stderr, "dltune db export: wrote %zu plans, %zu measurements and %zu recipe trials to %s%s\n",
      b->plans.size(), b->measurements.size(), b->recipe_trials.size(), o.output.c_str(),
      key ? (", signed by " + key->name).c_str() : " (unsigned)");
  return ok_status();
}

// import and merge: every source verified and checked before `db_path` is touched.
Status import_into(const DbOptions& o, const std::string& db_path, const char* verb) {
  tdb::ImportOptions opts;
  auto policy = tdb::parse_policy(o.policy);
  if (!policy) return std::move(policy).error().wrap("--policy");
  opts.policy = *policy;
  opts.require_signature = o.require_signature;
  opts.trusted_keys = env::get(env::kTrustedKeys);
  auto r = tdb::import_sources(db_path, o.inputs, opts);
  if (!r) return std::move(r).error();
  for (const std::string& w : r->warnings) {
    std::fprintf(stderr, "dltune db %s: warning: %s\n", verb, strings::printable(w, "").c_str());
  }
  for (const tdb::Source& src : r->sources) {
    if (src.verification.trust == tdb::Verification::Trust::kTrustedSigner) {
      std::fprintf(stderr, "dltune db %s: '%s' is %s\n", verb,
                   strings::printable(src.path, "").c_str(),
                   strings::printable(src.verification.description, "").c_str());
    }
  }
  print_report(std::string(verb) == "import" ? "imported" : "merged", r->report, o.json);
  return ok_status();
}

Status run_import(const DbOptions& o) {
  auto l = layers(o);
  if (!l) return std::move(l).error();
  // import_sources creates the database (and its directory) only once the bundle is known good.
  return import_into(o, l->user_db, "import");
}

Status run_merge(const DbOptions& o) { return import_into(o, o.output, "merge"); }

Status run_keygen(const DbOptions& o) {
  auto pub = tdb::generate_key_files(o.output, o.name);
  if (!pub) return std::move(pub).error();
  std::fprintf(stderr,
               "dltune db keygen: wrote %s/%s.key (secret, mode 0600) and %s/%s.pub; give the "
               ".pub line to the sites that should trust bundles you sign\n",
               o.output.c_str(), o.name.c_str(), o.output.c_str(), o.name.c_str());
  std::printf("%s", tdb::public_key_line(*pub).c_str());
  return ok_status();
}

Status run_settings(const DbOptions& o) {
  auto l = layers(o);
  if (!l) return std::move(l).error();
  const bool change = !o.set_require_signature.empty() || o.set_trusted_keys.has_value();
  if (!change) {
    auto db = open_user_to_read(o);
    if (!db) return std::move(db).error();
    auto s = db->settings();
    if (!s) return std::move(s).error();
    std::printf(
        "require_signature %s\ntrusted_keys %s\n", s->require_signature ? "on" : "off",
        s->trusted_keys.empty() ? "(none)" : strings::printable(s->trusted_keys, "").c_str());
    return ok_status();
  }
  if (!o.set_require_signature.empty() && o.set_require_signature != "on" &&
      o.set_require_signature != "off") {
    return invalid_input("--require-signature takes on or off, got '" +
                         o.set_require_signature.substr(0, 20) + "'");
  }
  if (o.set_trusted_keys && !o.set_trusted_keys->empty()) {
    auto keys = tdb::read_trusted_keys(*o.set_trusted_keys);  // a file that works, now
    if (!keys) return std::move(keys).error().wrap("--trusted-keys");
  }
  auto db = open_user(o);
  if (!db) return std::move(db).error();
  auto s = db->settings();
  if (!s) return std::move(s).error();
  if (!o.set_require_signature.empty()) s->require_signature = o.set_require_signature == "on";
  if (o.set_trusted_keys) s->trusted_keys = *o.set_trusted_keys;
  DLTUNE_TRY(db->set_settings(*s));
  std::printf("require_signature %s\ntrusted_keys %s\n", s->require_signature ? "on" : "off",
              s->trusted_keys.empty() ? "(none)" : strings::printable(s->trusted_keys, "").c_str());
  return ok_status();
}

Status run_prune(const DbOptions& o) {
  tdb::PruneSpec spec;
  if (!o.older_than.empty()) {
    auto age = tdb::parse_age(o.older_than);
    if (!age) return std::move(age).error().wrap("--older-than");
    spec.created_before = static_cast<int64_t>(std::time(nullptr)) - *age;
  }
  if (o.other_versions) spec.keep_dltune_version = DLTUNE_VERSION;
  if (!o.fingerprint.empty()) spec.fingerprint = o.fingerprint;
  auto db = open_user(o);
  if (!db) return std::move(db).error();
  auto n = db->prune(spec);
  if (!n) return std::move(n).error();
  std::printf("pruned %lld rows from %s\n", static_cast<long long>(*n), db->path().c_str());
  return ok_status();
}

Status run_rules(const DbOptions& o) {
  auto format = tdb::parse_rules_format(o.format);
  if (!format) return std::move(format).error().wrap("--format");
  auto f = filter_from(o);
  if (!f) return std::move(f).error();
  auto l = layers(o);
  if (!l) return std::move(l).error();
  auto r = tdb::export_rules(*l, *f, *format);
  if (!r) return std::move(r).error();
  for (const std::string& n : r->notes)
    std::fprintf(stderr, "dltune db rules: note: %s\n", strings::printable(n, "").c_str());
  for (const std::string& s : r->sources)
    std::fprintf(stderr, "dltune db rules: from the %s\n", strings::printable(s, "").c_str());
  if (o.output.empty()) {
    std::printf("%s", r->text.c_str());
    return ok_status();
  }
  return paths::write_file_atomic(o.output, r->text);
}

// The key `db lookup` asks for: this machine's (its topology's fingerprint and family, unless
// --fingerprint names another machine; this build's MPI, PMIx and dltune versions; NCCL's with
// --nccl) with every part the command line gives replacing its own.
Result<tdb::Key> lookup_key(const DbOptions& o) {
  auto shape = tdb::parse_shape(o.shape);
  if (!shape) return std::move(shape).error().wrap("--shape");
  tdb::Key key;
  if (o.fingerprint.empty()) {
    auto topo = topology::discover_default();
    if (!topo) {
      return topo.error().wrap(
          "finding this machine's fingerprint (give --fingerprint and --family to look up "
          "another machine's plan)");
    }
    key = tdb::make_key(*topo, *shape, o.recipe, !o.nccl.empty());
  } else {
    key.versions = tdb::current_versions(!o.nccl.empty());
  }
  key.shape = *shape;
  key.recipe = o.recipe;
  if (!o.fingerprint.empty()) key.fingerprint = o.fingerprint;
  if (!o.family.empty()) key.family = o.family;
  if (!o.mpi.empty()) key.versions.mpi = o.mpi;
  if (!o.pmix.empty()) key.versions.pmix = o.pmix;
  if (!o.nccl.empty()) key.versions.nccl = o.nccl;
  if (!o.dltune_version.empty()) key.versions.dltune = o.dltune_version;
  DLTUNE_TRY(tdb::validate_key(key));
  return key;
}

Status run_lookup(const DbOptions& o) {
  auto k = lookup_key(o);
  if (!k) return k.error();
  const tdb::Key& key = *k;
  auto l = layers(o);
  if (!l) return std::move(l).error();
  auto r = tdb::lookup_plan(*l, key);
  if (!r) return std::move(r).error();
  const nlohmann::json j = {
      {"hit", tdb::hit_kind_name(r->kind)},
      {"db", r->db_path},
      {"layer", r->kind == tdb::HitKind::kMiss ? ""
                : r->from_site                 ? "site"
                                               : "user"},
      {"site", r->site},
      {"signed_by", r->kind == tdb::HitKind::kMiss ? "" : r->plan.provenance.signed_by},
      {"differences", r->differences},
      {"warnings", r->warnings},
      {"plan", r->kind == tdb::HitKind::kMiss
                   ? nlohmann::json(nullptr)
                   : parse_json_bounded(r->plan.plan_json, {.max_bytes = tdb::kMaxPlanBytes})
                         .value_or(nlohmann::json(nullptr))}};
  if (!o.output.empty()) {  // the plan itself, for `dltune run --plan`
    if (r->kind == tdb::HitKind::kMiss) {
      return not_found("no plan for this key (" + key.fingerprint.substr(0, 12) + "..., shape " +
                       std::to_string(key.shape.nodes) + "x" +
                       std::to_string(key.shape.ranks_per_node) + "); nothing written to " +
                       o.output);
    }
    auto plan = recipes::parse_plan(r->plan.plan_json);
    if (!plan) return plan.error().wrap("the stored plan");
    DLTUNE_TRY(paths::write_file_atomic(o.output, recipes::serialize_plan(*plan) + "\n"));
  }
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
  } else if (r->kind == tdb::HitKind::kMiss) {
    std::printf(
        "miss (key: fingerprint %s, shape %lldx%lld, MPI '%s', PMIx '%s', NCCL '%s', "
        "dltune %s)\n",
        key.fingerprint.c_str(), static_cast<long long>(key.shape.nodes),
        static_cast<long long>(key.shape.ranks_per_node), key.versions.mpi.c_str(),
        key.versions.pmix.c_str(), key.versions.nccl.c_str(), key.versions.dltune.c_str());
  } else {
    std::string line = std::string(tdb::hit_kind_name(r->kind)) + " hit in " +
                       (r->from_site ? "site" : "user") + " database " + r->db_path;
    if (!r->site.empty()) line += " (site " + r->site + ")";
    if (r->plan.provenance.signed_by == tdb::kUnsigned) line += " (imported unsigned)";
    if (!r->differences.empty()) line += "; differs: " + strings::join(r->differences, ", ");
    std::printf("%s\n", strings::printable(line, "").c_str());
  }
  for (const std::string& w : r->warnings)
    std::fprintf(stderr, "dltune db lookup: %s\n", strings::printable(w, "").c_str());
  return ok_status();
}

// Adds one `db` subcommand whose callback runs `fn` and maps its error to the exit code.
CLI::App* add(CLI::App* db, const char* name, const char* help, int* exit_code,
              std::shared_ptr<DbOptions> o, Status (*fn)(const DbOptions&)) {
  auto* cmd = db->add_subcommand(name, help);
  cmd->add_option("--db", o->db,
                  "User tuning database (default: $DLTUNE_DB, else "
                  "$XDG_DATA_HOME/dltune/dltune.db)");
  cmd->callback([exit_code, o, fn, name] {
    Status s = fn(*o);
    *exit_code = s.ok() ? 0 : report_error(std::string("db ") + name, s.error());
  });
  return cmd;
}

}  // namespace

void setup_db(CLI::App& app, int* exit_code) {
  auto* db = app.add_subcommand(
      "db",
      "The tuning databases: show, export, import, merge, prune, rules, lookup, keygen, settings");
  db->require_subcommand(1);
  auto o = std::make_shared<DbOptions>();

  auto* show =
      add(db, "show", "Show the user and site databases and their plans", exit_code, o, run_show);
  show->add_flag("--json", o->json, "Print as JSON");

  auto* exp = add(db, "export", "Write the user database's rows to a bundle (JSON)", exit_code, o,
                  run_export);
  exp->add_option("-o,--output", o->output, "Bundle file to write")->required();
  exp->add_option("--site", o->site, "This site's name, recorded in the bundle's provenance");
  exp->add_option("--sign", o->sign_key,
                  "Sign the bundle with this secret key file (from `dltune db keygen`)");
  add_filters(exp, *o);

  const char* require_help =
      "Refuse bundles that are not signed by a key in $DLTUNE_TRUSTED_KEYS (or the database's "
      "trusted_keys setting)";
  auto* imp = add(db, "import", "Import a bundle into the user database (all or nothing)",
                  exit_code, o, run_import);
  imp->add_option("file", o->inputs, "Bundle file")->required()->expected(1);
  imp->add_option("--policy", o->policy,
                  "On conflicts: keep-local (default), prefer-newer, prefer-more-samples");
  imp->add_flag("--require-signature", o->require_signature, require_help);
  imp->add_flag("--json", o->json, "Print the counts as JSON");

  auto* merge =
      add(db, "merge", "Merge bundles and databases into one database", exit_code, o, run_merge);
  merge->add_option("sources", o->inputs, "Bundles (.json) or tuning databases")->required();
  merge->add_option("-o,--output", o->output, "Database to merge into (created when missing)")
      ->required();
  merge->add_option("--policy", o->policy,
                    "On conflicts: keep-local (default), prefer-newer, prefer-more-samples");
  merge->add_flag("--require-signature", o->require_signature, require_help);
  merge->add_flag("--json", o->json, "Print the counts as JSON");

  auto* keygen = add(db, "keygen", "Make a site's Ed25519 key pair for signing bundles", exit_code,
                     o, run_keygen);
  keygen->add_option("--name", o->name, "The site's key name (letters, digits, . _ -)")->required();
  keygen->add_option("-o,--output", o->output, "Directory for NAME.key and NAME.pub")->required();

  auto* settings = add(db, "settings",
                       "Show or set what a database takes in: --require-signature on|off, "
                       "--trusted-keys FILE (\"\" to clear)",
                       exit_code, o, run_settings);
  settings->add_option("--require-signature", o->set_require_signature,
                       "on: imports and merges into this database need a trusted signature");
  settings->add_option("--trusted-keys", o->set_trusted_keys,
                       "A trusted-keys file (absolute path) used with $DLTUNE_TRUSTED_KEYS");

  auto* prune = add(db, "prune", "Delete old rows from the user database", exit_code, o, run_prune);
  prune->add_option("--older-than", o->older_than, "Rows older than this age: 30d, 12h, ...");
  prune->add_flag("--other-versions", o->other_versions,
                  "Rows measured with another dltune version than this one");
  prune->add_option("--fingerprint", o->fingerprint, "Rows of this topology fingerprint");

  auto* rules = add(db, "rules",
                    "Write a runtime's collective settings from the stored plans: every job "
                    "shape at once (ompi, mpich), or one --shape",
                    exit_code, o, run_rules);
  rules->add_option("--format", o->format,
                    "ompi (Open MPI 4.1 coll/tuned rules file), mpich (MPICH 4 selection JSON "
                    "for MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE), mvapich (MVAPICH2 tuning "
                    "variables), nccl-env (NCCL_ALGO / NCCL_PROTO)");
  rules->add_option("-o,--output", o->output, "File to write (default: standard output)");
  add_filters(rules, *o);

  auto* lookup = add(db, "lookup", "Look a plan up the way a launch does (user, then sites)",
                     exit_code, o, run_lookup);
  lookup->add_option("--shape", o->shape, "Job shape: NODESxRANKS_PER_NODE or RANKS")->required();
  lookup->add_option("--fingerprint", o->fingerprint,
                     "Topology fingerprint (hex; default: this machine's)");
  lookup->add_option("--family", o->family,
                     "Topology family, for near hits (default: this machine's, without "
                     "--fingerprint)");
  lookup->add_option("--recipe", o->recipe, "Recipe signature (hex; none for collectives)");
  lookup->add_option("--mpi", o->mpi, "MPI version (default: this build's)");
  lookup->add_option("--pmix", o->pmix, "PMIx version (default: this build's)");
  lookup->add_option("--nccl", o->nccl, "NCCL version (default: none, a CPU job's plan)");
  lookup->add_option("--dltune-version", o->dltune_version, "dltune version (default: this one)");
  lookup->add_option("-o,--output", o->output,
                     "Write the plan found to this file (a Plan for `dltune run --plan`)");
  lookup->add_flag("--json", o->json, "Print as JSON");
}

}  // namespace dltune::cli
