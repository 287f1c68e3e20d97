// Layered plan look-up: the user database first, then each site database (read-only) in the
// order DLTUNE_SITE_DB lists them. An exact hit (same Key identity) anywhere beats a near hit
// (same family and recipe, different fingerprint, counts, job shape or versions) anywhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "tuner/db/records.h"

namespace dltune::tuner::db {

struct Layers {
  std::string user_db;                // "" for none
  std::vector<std::string> site_dbs;  // read-only, in priority order
};

// The layers from the environment: `db_flag` (--db) when set, else DLTUNE_DB, else
// paths::user_db(); site databases from DLTUNE_SITE_DB (colon-separated, empty entries
// skipped). Fails only when no user database path can be determined.
Result<Layers> layers_from_env(const std::optional<std::string>& db_flag);

enum class HitKind { kMiss, kExact, kNear };
const char* hit_kind_name(HitKind kind);  // "miss", "exact", "near"

struct LookupResult {
  HitKind kind = HitKind::kMiss;
  PlanRecord plan;                       // valid unless kMiss
  std::string db_path;                   // which database it came from
  bool from_site = false;                // true when from a site database
  std::string site;                      // the row's provenance site ("" for a local row)
  std::vector<std::string> differences;  // near hits: what differs from the key asked for
  std::vector<std::string> warnings;     // layers that were skipped, and why
};

// Looks `key` up through `layers`. A user database that does not exist yet is a miss, and is
// not created; a site database that is missing or unreadable (damaged, a negative or newer
// schema number) is skipped with a warning in the result, which the caller says once (a launch
// must not fail, nor hang, because of a shared file). Fails only when the user database exists
// but cannot be read.
Result<LookupResult> lookup_plan(const Layers& layers, const Key& key);

// Near-hit ranking, exposed for tests: lower is closer. Same versions, same fingerprint, same
// node count and a closer total rank count each make a candidate closer; newer breaks ties.
double near_distance(const Key& wanted, const PlanRecord& candidate);
std::vector<std::string> describe_differences(const Key& wanted, const Key& got);

}  // namespace dltune::tuner::db
