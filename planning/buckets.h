// The gradient buckets of a model: which slices of the flat gradient buffer are reduced
// together, and when each becomes ready during backward. The trainer reduces these buckets
// (engine/train/trainer.h) and the step-time model charges them (planning/step_time.h): one
// statement of both.
//
// How they are made. A parameter tensor's gradient is final after the backward of the earliest
// node (in list order) that reads it (engine/graph/backward_plan.h). Walking the nodes from the
// last to the first, the tensors each makes final go into the current bucket (highest offset
// first); a bucket closes at a node boundary once it holds bucket_bytes, or before a tensor that
// is not directly below it in the flat buffer (a bucket is one contiguous range). Tensors become
// final in reverse layout order (recipes/model/graph.h), so in practice buckets cover the buffer
// from its end backwards, as whole nodes. A bucket is ready after the backward of the node that
// made its last tensor final: with overlap on, the trainer starts its allreduce then.
#pragma once

#include <cstdint>
#include <vector>

#include "recipes/model/graph.h"

namespace dltune::planning {

struct GradBucket {
  int64_t begin = 0, end = 0;  // [begin, end) floats of the flat gradient buffer
  std::vector<int> tensors;    // its parameter tensors (GraphInfo::params), as they became final
  int ready_after = 0;         // the node (list index) whose backward makes it complete
  int64_t floats() const { return end - begin; }
};

// The buckets of ~bucket_bytes (at least one float's worth) of the model `info` analyses, in
// the order they become ready. Precondition: info.ok().
std::vector<GradBucket> gradient_buckets(const recipes::GraphInfo& info, uint64_t bucket_bytes);

}  // namespace dltune::planning
