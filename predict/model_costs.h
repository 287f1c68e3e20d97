// What a prediction needs to know of a model: per graph node its forward FLOPs and output size,
// and the gradient buckets the engine reduces, in the order backward makes them final.
//
// The bucket order is the engine's (engine/graph/backward_plan.h, Trainer::make_buckets): a
// parameter tensor's gradient is final after the backward of the earliest node (in list order)
// that reads it; walking the nodes from the last to the first, the tensors each makes final go
// into the current bucket (highest offset first), a bucket closes at a node boundary once it
// holds bucket_bytes, or before a tensor not directly below it in the flat buffer. The engine is
// not linked here (the launcher links no BLAS); tests/predict checks the two agree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "recipes/model/graph.h"

namespace dltune::predict {

struct GradBucket {
  int64_t floats = 0;
  int ready_after = 0;  // the node (list index) whose backward completes it
};

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

// The engine's buckets of ~bucket_bytes (> 0), in the order they become final.
std::vector<GradBucket> gradient_buckets(const recipes::GraphInfo& info, uint64_t bucket_bytes);

}  // namespace dltune::predict
