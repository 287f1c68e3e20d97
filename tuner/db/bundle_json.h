// JSON <-> row conversion for bundles. Internal to tuner/db (bundle.cc); the parse functions
// check every field's presence and type and return invalid_input naming the field.
#pragma once

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "tuner/db/records.h"

namespace dltune::tuner::db::detail {

nlohmann::json provenance_to_json(const Provenance& p);
nlohmann::json plan_to_json(const PlanRecord& p);
nlohmann::json measurement_to_json(const Measurement& m);
nlohmann::json trial_to_json(const RecipeTrial& t);

Result<Provenance> provenance_from_json(const nlohmann::json& j);
Result<PlanRecord> plan_from_json(const nlohmann::json& j);
Result<Measurement> measurement_from_json(const nlohmann::json& j);
Result<RecipeTrial> trial_from_json(const nlohmann::json& j);

}  // namespace dltune::tuner::db::detail
