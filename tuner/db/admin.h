// The operations behind `dltune db` that are more than one store call: argument parsing shared
// with other commands and the database summary (`db show`). `db rules` is rules_export.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "tuner/db/lookup.h"
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
// summarize() as lines for people, printable (common/strings.h printable: no control
// characters from the databases reach a terminal).
std::string summary_text(const nlohmann::json& summary);

}  // namespace dltune::tuner::db
