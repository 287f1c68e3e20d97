// What the step-time model and the layout search need to know of a model from its graph alone:
// per graph node its forward FLOPs, output size and parameters. The layout search ranks layouts
// by 3 x the FLOPs when no node was timed (planning/layout_search.h); `dltune predict` turns them
// into seconds at a device's rate (predict/compute.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "recipes/model/graph.h"

namespace dltune::planning {

struct ModelCosts {
  std::string name;
  recipes::GraphInfo info;
  std::vector<std::string> node_names;
  std::vector<double> flops;           // per node, forward, per sample
  std::vector<int64_t> output_floats;  // per node, per sample
  std::vector<int64_t> param_floats;   // per node: the tensors it owns
  double flops_per_sample = 0;         // forward
  int64_t parameters = 0;
  bool transformer = false;  // the graph has attention (the device table's fractions differ)
  int nodes() const { return static_cast<int>(flops.size()); }
  int64_t gradient_bytes() const { return parameters * 4; }
};

// Errors (invalid_input): a graph that does not analyse (its first problem).
Result<ModelCosts> model_costs(const recipes::Graph& graph, const std::string& name);

}  // namespace dltune::planning
