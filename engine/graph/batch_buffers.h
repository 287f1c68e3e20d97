// What the executor (engine/graph/model.h) allocates for one batch of a graph beyond its
// parameters and state, worked out from the graph without building it: every node's output (a
// fused ReLU's is its node's), what each kernel keeps for backward (engine/ops/op_memory.h), the
// activation-gradient slots of the backward plan (backward_plan.h) and the kernels' shared
// scratch. Model::reserve() allocates exactly this (engine/tests/memory_model_test.cc checks).
//
// The memory model (planning/memory_model.h) takes it as its per-batch input: planning links no
// engine, and this file links no kernel and no BLAS, so the launcher sizes layouts in its own
// process by passing batch_buffers to planning.
#pragma once

#include <cstdint>

#include "planning/memory_model.h"
#include "recipes/model/graph.h"

namespace dltune::engine {

// The buffers for batches of up to `batch` samples, the kernels computing as `compute` says
// (a node's kernel from compute.kernels, else its default). Precondition: `info` is the
// analysis of `graph` and info.ok(). Errors (invalid_input): a precision other than fp32 and
// bf16, a kernel choice for a node the graph does not have.
Result<planning::BatchBuffers> batch_buffers(const recipes::Graph& graph,
                                             const recipes::GraphInfo& info, int64_t batch,
                                             const planning::ComputeSettings& compute);

}  // namespace dltune::engine
