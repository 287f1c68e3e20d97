#include "engine/graph/memory_model.h"

#include <algorithm>
#include <cstdio>

#include "engine/graph/backward_plan.h"
#include "engine/ops/op.h"

namespace dltune::engine {

Result<MemoryTerms> estimate_memory(const recipes::Graph& graph, const MemoryQuery& q) {
  const recipes::GraphInfo info = recipes::analyze_graph(graph);
  if (!info.ok()) {
    const auto& [index, message] = info.problems.front();
    return invalid_input(
        "node " +
        (index < graph.nodes.size() ? "'" + graph.nodes[index].name + "'" : std::to_string(index)) +
        ": " + message);
  }
  constexpr int64_t F = sizeof(float);
  const int64_t B = q.microbatch;
  MemoryTerms m;
  m.parameters = info.parameters * F;
  m.gradients = info.parameters * F;
  m.optimizer = (q.optimizer == "adamw" ? 2 : 1) * info.parameters * F;
  m.state = info.state_floats * F;
  // One batch's activations, op state and workspace, as Model::reserve() allocates them.
  int64_t acts = 0, saved = 0, ws = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const recipes::Node& n = graph.nodes[i];
    acts += B * recipes::numel(info.outputs[i]);
    std::vector<recipes::Shape> in;
    for (int src : info.inputs[i])
      in.push_back(src < 0 ? graph.input : info.outputs[static_cast<size_t>(src)]);
    auto op = make_cpu_op(n.op);
    DLTUNE_TRY_CTX(op->setup(n, in, info.outputs[i]), "node '" + n.name + "'");
    saved += op->saved_floats(static_cast<int>(B));
    ws = std::max(ws, op->workspace_floats(static_cast<int>(B)));
  }
  int64_t slots = 0;
  for (int64_t s : plan_backward(info).slot_floats) slots += B * s;
  const int64_t one_set = (acts + saved) * F;
  const int64_t input = B * recipes::numel(graph.input) * F;
  const int in_flight = std::max(q.in_flight, 1);
  m.activations = q.recompute ? in_flight * input + one_set : in_flight * one_set;
  m.workspace = (slots + std::max<int64_t>(ws, 1)) * F;
  const int64_t output = B * recipes::numel(info.output()) * F;
  // The trainer's input batch and loss gradient; a stage's boundary buffers per micro-batch in
  // flight (received input and its gradient; sent output and its gradient).
  m.communication = input + output;
  if (q.boundary_in) m.communication += 2 * in_flight * input;
  if (q.boundary_out) m.communication += 2 * in_flight * output;
  return m;
}

std::string memory_text(int64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1 << 30)
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
  else if (b >= 1 << 20)
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.0f KiB", b / 1024);
  return buf;
}

}  // namespace dltune::engine
