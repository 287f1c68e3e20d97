// TrainConfig's compute keys (engine issue 38: "precision" and "kernels"), kept apart from
// train_config.cc so that the JSON form of the rest can change without touching them.
#pragma once

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "engine/train/train_config.h"

namespace dltune::engine {

// precision is fp32 or bf16; every kernel choice names a node and a kernel (whether the model
// has them is Model::set_kernels()'s to say). Errors: invalid_input naming the key.
Status validate_compute(const TrainConfig& c);
// Reads "precision" (a string) and "kernels" (an object of node -> kernel strings) when present.
Status parse_compute(const nlohmann::json& j, TrainConfig& c);
// Writes them ("kernels" only when not empty).
void compute_to_json(const TrainConfig& c, nlohmann::json& j);

}  // namespace dltune::engine
