#include "engine/graph/batch_buffers.h"

#include <algorithm>
#include <vector>

#include "engine/core/precision.h"
#include "engine/graph/backward_plan.h"
#include "engine/ops/op_memory.h"

namespace dltune::engine {

Result<planning::BatchBuffers> batch_buffers(const recipes::Graph& graph,
                                             const recipes::GraphInfo& info, int64_t batch,
                                             const planning::ComputeSettings& compute) {
  OpCompute c;
  c.threads = std::max(compute.threads, 1);
  if (!parse_precision(compute.precision, &c.precision))
    return invalid_input("precision: expected fp32 or bf16, got '" + compute.precision + "'");
  for (const auto& [node, kernel] : compute.kernels) {
    const bool found = std::any_of(graph.nodes.begin(), graph.nodes.end(),
                                   [&](const recipes::Node& n) { return n.name == node; });
    if (!found) return invalid_input("kernels: the model has no node '" + node + "'");
  }
  const int64_t B = batch;
  int64_t outputs = 0, saved = 0, scratch = 0;
  const std::vector<int> fused = fused_relus(graph, info);  // as Model::build fuses
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (fused[i] < 0) outputs += B * recipes::numel(info.outputs[i]);
    std::vector<recipes::Shape> in;
    for (int src : info.inputs[i])
      in.push_back(src < 0 ? graph.input : info.outputs[static_cast<size_t>(src)]);
    const auto kernel = compute.kernels.find(graph.nodes[i].name);
    c.kernel = kernel == compute.kernels.end() ? "" : kernel->second;
    const OpMemory m = op_memory(graph.nodes[i], in, info.outputs[i], static_cast<int>(B), c);
    saved += m.saved_floats;
    scratch = std::max(scratch, m.workspace_floats);
  }
  int64_t slots = 0;
  for (int64_t s : plan_backward(info, fused).slot_floats) slots += B * s;
  planning::BatchBuffers b;
  b.kept = outputs + saved;
  b.workspace = slots + std::max<int64_t>(scratch, 1);
  return b;
}

}  // namespace dltune::engine
