#include "engine/graph/batch_buffers.h"

#include <algorithm>
#include <vector>

#include "engine/graph/backward_plan.h"
#include "engine/ops/op_memory.h"

namespace dltune::engine {

planning::BatchBuffers batch_buffers(const recipes::Graph& graph, const recipes::GraphInfo& info,
                                     int64_t batch) {
  const int64_t B = batch;
  int64_t outputs = 0, saved = 0, scratch = 0;
  const std::vector<int> fused = fused_relus(graph, info);  // as Model::build fuses
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (fused[i] < 0) outputs += B * recipes::numel(info.outputs[i]);
    std::vector<recipes::Shape> in;
    for (int src : info.inputs[i])
      in.push_back(src < 0 ? graph.input : info.outputs[static_cast<size_t>(src)]);
    const OpMemory m = op_memory(graph.nodes[i], in, info.outputs[i], static_cast<int>(B));
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
