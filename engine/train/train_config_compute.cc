#include "engine/train/train_config_compute.h"

#include "engine/core/precision.h"

namespace dltune::engine {

Status validate_compute(const TrainConfig& c) {
  Precision p;
  if (!parse_precision(c.precision, &p))
    return invalid_input("train config: key 'precision': expected fp32 or bf16, got '" +
                         c.precision + "'");
  for (const auto& [node, kernel] : c.kernels) {
    if (node.empty() || kernel.empty())
      return invalid_input(
          "train config: key 'kernels': every entry needs a node name and a kernel name");
  }
  return ok_status();
}

Status parse_compute(const nlohmann::json& j, TrainConfig& c) {
  if (auto it = j.find("precision"); it != j.end()) {
    if (!it->is_string())
      return invalid_input("train config: key 'precision': expected \"fp32\" or \"bf16\", got " +
                           it->dump());
    c.precision = it->get<std::string>();
  }
  if (auto it = j.find("kernels"); it != j.end()) {
    if (!it->is_object())
      return invalid_input(
          "train config: key 'kernels': expected an object of node name -> kernel name, got " +
          it->dump());
    c.kernels.clear();
    for (const auto& [node, kernel] : it->items()) {
      if (!kernel.is_string())
        return invalid_input("train config: key 'kernels': node '" + node +
                             "': expected a kernel name, got " + kernel.dump());
      c.kernels[node] = kernel.get<std::string>();
    }
  }
  return validate_compute(c);
}

void compute_to_json(const TrainConfig& c, nlohmann::json& j) {
  j["precision"] = c.precision;
  if (!c.kernels.empty()) j["kernels"] = c.kernels;
}

}  // namespace dltune::engine
