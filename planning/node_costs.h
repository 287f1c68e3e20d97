// The measured cost of each graph node, as the layout search takes it (LayoutRequest::node_cost,
// node_fixed_cost, optimizer_cost_per_parameter, in seconds) and as it crosses from the worker
// that times them (`dltune-worker profile --fit`, engine/train/node_costs.h) to the launcher
// that searches with them: plain data, one JSON writer and one reader here.
//
//   {"per_sample": [s, ...], "per_call": [s, ...], "optimizer_per_parameter": s,
//    "small_batch": b, "large_batch": b}
//
// per_sample and per_call hold one entry per graph node: a micro-batch of m samples costs the
// node per_call + m x per_sample seconds (forward and backward together).
#pragma once

#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"

namespace dltune::planning {

struct NodeCosts {
  std::vector<double> per_sample, per_call;
  double optimizer_per_parameter = 0;
  int small_batch = 0, large_batch = 0;  // the two batches timed
};

nlohmann::json node_costs_to_json(const NodeCosts& c);

// Errors (invalid_input, naming the key): not an object, a missing or mistyped key, lists of
// different lengths, a cost that is negative or not finite, batches below 1 or out of order.
Result<NodeCosts> node_costs_from_json(const nlohmann::json& j);
// Parses `text` (bounded: 16 MiB, depth 8) then node_costs_from_json().
Result<NodeCosts> parse_node_costs(std::string_view text);

}  // namespace dltune::planning
