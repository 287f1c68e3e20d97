// The operations behind `dltune db` that are more than one store call: argument parsing shared
// with other commands, the database summary (`db show`), and choosing the stored plan that
// `db rules` exports.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "tuner/db/lookup.h"
#include "tuner/db/ompi_rules.h"
#include "tuner/db/store.h"

namespace dltune::tuner::db {

// "NxR" (nodes x ranks per node) or "R" (one node). invalid_input otherwise, e.g.
// "expected a job shape such as 2x4 or 8, got '2y4'".
Result<JobShape> parse_shape(std::string_view text);
// An age: a positive integer with a unit s, m, h, d or w ("30d"). Returns seconds.
Result<int64_t> parse_age(std::string_view text);

// A stored plan in one line, for conflict reports: "per-rank 64 (global 128, weak), bucket
// 4 MiB, overlap on, warm-up 20, lr x1.00; allreduce rd then ring"; "(not a valid plan)".
std::string plan_summary(const std::string& plan_json);
// Unix seconds as "2024-05-01T10:00:00Z".
std::string utc_time(int64_t t);

// The summary of every layer: for each database its path, layer ("user" / "site"), schema
// version and row counts (or why it could not be read: a user database that does not exist is
// reported, not created), and every plan row with its recipe trials (with `with_plans`). Never
// fails: problems are reported per database in "error".
nlohmann::json summarize(const Layers& layers, bool with_plans);
// summarize() as lines for people.
std::string summary_text(const nlohmann::json& summary);

struct RulesExport {
  std::string text;                // the rules file
  std::vector<std::string> notes;  // approximations and skipped collectives
  PlanRecord plan;                 // the plan it came from
  std::string db_path;             // and where that plan was found
};
// The newest plan matching `filter` (whose shape must be set), searched in the user database
// then each site database; then its collectives as an Open MPI rules file for shape.ranks()
// processes. not_found when no database holds such a plan (the message says how to make one);
// invalid_input when the plan's collectives cannot be exported.
Result<RulesExport> ompi_rules_from_layers(const Layers& layers, const Filter& filter);

}  // namespace dltune::tuner::db
