// Bundles: a self-describing JSON file that carries plans, measurements and recipe trials
// between databases and sites, optionally signed (Ed25519, signing.h).
//
//   {"format": "dltune-tuning-bundle", "format_version": 3,
//    "provenance": {"site", "host", "user", "dltune_version", "created_at"},
//    "content": {"plans": [{"key": {...}, "plan_json": "...", "provenance": {...}}],
//                "measurements": [{"key": {...}, "collective", "algorithm", "segment_bytes",
//                                  "bytes", "median_us", "p10_us", "p90_us", "iqr_us",
//                                  "samples", "failed", "reason", "provenance": {...}}],
//                "recipe_trials": [{"key": {...}, "round", "candidate", "label",
//                                   "per_rank_batch", "global_batch", "scaling", "bucket_bytes",
//                                   "overlap", "lr_scale", "steps", "samples_per_s", "step_s",
//                                   "median_samples_per_s", "iqr_samples_per_s" (null when not
//                                   measured), "failed", "reason", "provenance": {...}}]},
//    "checksum": {"algorithm": "sha256", "value": sha256(PAYLOAD)},
//    "signatures": [{"algorithm": "ed25519", "signer": NAME, "public_key": BASE64,
//                    "value": BASE64(Ed25519 signature of PAYLOAD)}]}
//
// PAYLOAD is the canonical JSON text (nlohmann's dump(): keys sorted, no spaces) of the object
// {"content", "format", "format_version", "provenance"}: the checksum and every signature cover
// the whole bundle but themselves, the exporter's provenance included. The checksum catches
// accidents only (anyone can recompute it); a signature by a trusted key says who vouched for
// the content. "signatures" may be absent (an unsigned bundle).
//
// "key" is {"fingerprint", "family", "versions": {"mpi", "pmix", "nccl", "dltune"}, "nodes",
// "ranks_per_node", "recipe"}. The plan stays text so that a round trip is byte-exact.
// Format versions 1 and 2 (older dltunes': checksum over "content" only, no signatures) are
// refused with a message saying to re-export: their provenance could be changed unnoticed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "tuner/db/records.h"
#include "tuner/db/signing.h"
#include "tuner/db/store.h"

namespace dltune::tuner::db {

inline constexpr int kBundleFormatVersion = 3;
// The oldest format read: 3, the first whose checksum covers the provenance.
inline constexpr int kOldestBundleFormatVersion = 3;
inline constexpr size_t kMaxBundleBytes = size_t{256} << 20;

struct Bundle {
  Provenance provenance;  // who exported it
  std::vector<PlanRecord> plans;
  std::vector<Measurement> measurements;
  std::vector<RecipeTrial> recipe_trials;
};

// How a source's signatures checked out against the trusted keys.
struct Verification {
  enum class Trust { kNoSignature, kUntrustedSigner, kTrustedSigner };
  Trust trust = Trust::kNoSignature;
  std::string
      signer;  // kTrustedSigner: the trusted key's name; kUntrustedSigner: the name it claims
  // One phrase for people: "signed by trusted key 'siteA'", "unsigned", "signed by 'x', which
  // is not a trusted key", "a database file (unsigned)".
  std::string description;
};

// A bundle or database read from a file, verified, its rows marked: every row's
// provenance.signed_by is the trusted signer's name, or kUnsigned.
struct Source {
  std::string path;
  Bundle bundle;
  Verification verification;
};

// The bundle as JSON text (one line per row, checksum filled in), signed with `key` when given.
std::string bundle_to_json(const Bundle& bundle, const SecretKey* key = nullptr);

// Parses and checks a whole bundle, in this order, before any row is read: size and nesting
// bounds (a 75,000-level bundle crashed the old checksum's dump()), JSON syntax, format name
// and version, checksum, then every signature: one whose content changed after signing is
// always an error, whoever signed it (checked with the trusted key of its name when there is
// one, else with the key it carries). Then every row (records.h validate_*: well formed and
// plausible). Errors are invalid_input and say what and where ("content.plans[3].key
// .fingerprint: ..."); nothing is half-parsed. Rows come back as in the file (signed_by "").
Result<Bundle> parse_bundle(std::string_view text, const std::vector<PublicKey>& trusted,
                            Verification* verification);
// For callers that need no signatures (an unsigned view; signatures are still checked against
// the keys they carry).
Result<Bundle> parse_bundle(std::string_view text);

// The rows of `db` selected by `filter`, with provenance for this export. Rows with no site
// get `site` (the exporting site's name); `site` must pass the provenance text rules.
Result<Bundle> export_bundle(TuningDb& db, const Filter& filter, const std::string& site);

// Reads `path` as a bundle (JSON) or, when it starts with the SQLite header, as a tuning
// database opened read-only (always unsigned: anyone can write an SQLite file), verifies it
// against `trusted` and marks its rows (see Source). Errors name the path.
Result<Source> read_source(const std::string& path, const std::vector<PublicKey>& trusted = {});

// What an import or merge into a database may take.
struct ImportOptions {
  ConflictPolicy policy = ConflictPolicy::kKeepLocal;
  bool require_signature = false;  // --require-signature
  std::string trusted_keys;        // a trusted-keys file (DLTUNE_TRUSTED_KEYS); "" for none
};

struct ImportOutcome {
  MergeReport report;                 // all sources together
  std::vector<Source> sources;        // as read (rows marked), in order
  std::vector<std::string> warnings;  // unsigned or untrusted sources that were taken
  bool require_signature = false;     // the rule that applied (option or database setting)
};

// Imports `paths` in order into the database at `db_path` (created when missing), all or
// nothing before the first write. The trusted keys: a database that sets its own trust
// (trusted_keys or require_signature) trusts its trusted_keys file's keys, narrowed to those
// options.trusted_keys (DLTUNE_TRUSTED_KEYS) lists too when that is set, and never one more
// (each key the environment would have added is a warning); a database that sets neither
// trusts options.trusted_keys'. A trusted-keys file others may write is refused (signing.h).
// Signatures are required when options say so or the database's require_signature setting is
// on. Every source is read, verified and validated
// first; a refused source (bad input, a signature that does not verify, an unsigned or untrusted
// source when signatures are required) is invalid_input naming it, and then nothing is written
// and no database is created. Then each source is merged in its own transaction under
// options.policy; report.plan_conflicts lists every plan conflict.
Result<ImportOutcome> import_sources(const std::string& db_path,
                                     const std::vector<std::string>& paths,
                                     const ImportOptions& options);

// read_source(path) then db.merge_rows(...) under `policy` (unsigned view, no settings): for
// tests and tools that hold an open database.
Result<MergeReport> import_file(TuningDb& db, const std::string& path, ConflictPolicy policy);

}  // namespace dltune::tuner::db
