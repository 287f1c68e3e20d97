#include "planning/node_costs.h"

#include <cmath>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/json_input.h"

namespace dltune::planning {
namespace {

Result<std::vector<double>> costs_at(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array())
    return invalid_input(std::string("node costs: '") + key + "': expected a list of seconds");
  std::vector<double> out;
  for (const nlohmann::json& v : *it) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      return invalid_input(std::string("node costs: '") + key + "': expected seconds >= 0, got " +
                           v.dump());
    out.push_back(v.get<double>());
  }
  return out;
}

Result<int> batch_at(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 1 ||
      it->get<int64_t>() > (int64_t{1} << 30))
    return invalid_input(std::string("node costs: '") + key + "': expected a batch >= 1");
  return static_cast<int>(it->get<int64_t>());
}

}  // namespace

nlohmann::json node_costs_to_json(const NodeCosts& c) {
  return {{"per_sample", c.per_sample},
          {"per_call", c.per_call},
          {"optimizer_per_parameter", c.optimizer_per_parameter},
          {"small_batch", c.small_batch},
          {"large_batch", c.large_batch}};
}

Result<NodeCosts> node_costs_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return invalid_input("node costs: expected a JSON object");
  auto per_sample = costs_at(j, "per_sample");
  if (!per_sample) return per_sample.error();
  auto per_call = costs_at(j, "per_call");
  if (!per_call) return per_call.error();
  NodeCosts c;
  c.per_sample = std::move(*per_sample);
  c.per_call = std::move(*per_call);
  if (c.per_call.size() != c.per_sample.size())
    return invalid_input("node costs: 'per_call' has " + std::to_string(c.per_call.size()) +
                         " entries, 'per_sample' " + std::to_string(c.per_sample.size()));
  const auto opt = j.find("optimizer_per_parameter");
  if (opt == j.end() || !opt->is_number() || !std::isfinite(opt->get<double>()) ||
      opt->get<double>() < 0)
    return invalid_input("node costs: 'optimizer_per_parameter': expected seconds >= 0");
  c.optimizer_per_parameter = opt->get<double>();
  auto small = batch_at(j, "small_batch");
  if (!small) return small.error();
  auto large = batch_at(j, "large_batch");
  if (!large) return large.error();
  c.small_batch = *small;
  c.large_batch = *large;
  if (c.small_batch > c.large_batch)
    return invalid_input("node costs: 'small_batch' is above 'large_batch'");
  return c;
}

Result<NodeCosts> parse_node_costs(std::string_view text) {
  auto j = parse_json_bounded(text, {.max_bytes = 16 << 20, .max_depth = 8});
  if (!j) return j.error().wrap("node costs");
  return node_costs_from_json(*j);
}

}  // namespace dltune::planning
