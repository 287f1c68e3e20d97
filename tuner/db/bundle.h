// Bundles: a self-describing JSON file that carries plans, measurements and recipe trials
// between databases and sites.
//
//   {"format": "dltune-tuning-bundle", "format_version": 2,
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
//    "checksum": {"algorithm": "sha256", "value": sha256(content serialised canonically)}}
//
// "key" is {"fingerprint", "family", "versions": {"mpi", "pmix", "nccl", "dltune"}, "nodes",
// "ranks_per_node", "recipe"}. The plan stays text so that a round trip is byte-exact.
// Format version 1 (before recipe trials) is still read; it has no "recipe_trials".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "tuner/db/records.h"
#include "tuner/db/store.h"

namespace dltune::tuner::db {

inline constexpr int kBundleFormatVersion = 2;
inline constexpr int kOldestBundleFormatVersion = 1;
inline constexpr size_t kMaxBundleBytes = size_t{256} << 20;

struct Bundle {
  Provenance provenance;  // who exported it
  std::vector<PlanRecord> plans;
  std::vector<Measurement> measurements;
  std::vector<RecipeTrial> recipe_trials;
};

// The bundle as JSON text (one line per row, checksum filled in).
std::string bundle_to_json(const Bundle& bundle);

// Parses and validates a whole bundle: JSON syntax (a truncated file fails here), format name
// and version (kOldestBundleFormatVersion..kBundleFormatVersion), checksum, then every row
// (records.h validate_*). Errors are invalid_input and
// say what and where ("content.plans[3].key.fingerprint: ..."); nothing is half-parsed.
Result<Bundle> parse_bundle(std::string_view text);

// The rows of `db` selected by `filter`, with provenance for this export. Rows with no site
// get `site` (the exporting site's name); `site` must pass the provenance text rules.
Result<Bundle> export_bundle(TuningDb& db, const Filter& filter, const std::string& site);

// Reads `path` as a bundle (JSON) or, when it starts with the SQLite header, as a tuning
// database opened read-only, and returns its rows. Errors name the path.
Result<Bundle> read_source(const std::string& path);

// read_source(path) then db.merge_rows(...) under `policy`: validates everything first and
// writes in one transaction, so a bad bundle leaves the database unchanged. Idempotent.
Result<MergeReport> import_file(TuningDb& db, const std::string& path, ConflictPolicy policy);

}  // namespace dltune::tuner::db
