// The plain Topology model as JSON and back, exactly (every field, in order): how a topology
// loaded in a child process (isolated_load.h) comes back to its parent. Not the user-facing
// `dltune topo --json` shape (render_json), which is for people and scripts.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "topology/topology.h"

namespace dltune::topology {

// One line of JSON; model_from_json(model_to_json(t)) == t.
std::string model_to_json(const Topology& topo);
// Parses what model_to_json wrote (bounded: common/json_input.h). invalid_input naming the
// field when a field is missing, mistyped or out of range.
Result<Topology> model_from_json(std::string_view text);

}  // namespace dltune::topology
