#include "engine/graph/memory_model.h"

#include <algorithm>
#include <cstdio>

#include "common/strings.h"
#include "engine/graph/backward_plan.h"
#include "engine/ops/op.h"

namespace dltune::engine {

namespace {

// The query's threads, precision and this node's kernel, as Model applies them.
Status apply_compute(Op& op, const MemoryQuery& q) {
  op.set_threads(q.threads);
  Precision p = Precision::kFp32;
  if (!parse_precision(q.precision, &p))
    return invalid_input("precision: expected fp32 or bf16, got '" + q.precision + "'");
  op.set_precision(p);
  if (auto it = q.kernels.find(op.node().name); it != q.kernels.end())
    DLTUNE_TRY(op.set_kernel(it->second));
  return ok_status();
}

}  // namespace

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
  const int64_t vectors = q.optimizer == "adamw" ? 2 : 1;  // state vectors of the optimizer
  if (q.offload_optimizer) {
    m.offloaded = vectors * info.parameters * F;
    m.optimizer = offload_buffers(info.parameters) * vectors *
                  std::min(info.parameters, kOffloadChunkFloats) * F;  // engine/gpu/offload.h
  } else {
    m.optimizer = vectors * info.parameters * F;
  }
  m.state = info.state_floats * F;
  // One batch's activations, op state and workspace, as Model::reserve() allocates them.
  int64_t acts = 0, saved = 0, ws = 0;
  const std::vector<int> fused = fused_relus(graph, info);  // as Model::build fuses
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const recipes::Node& n = graph.nodes[i];
    if (fused[i] < 0) acts += B * recipes::numel(info.outputs[i]);
    std::vector<recipes::Shape> in;
    for (int src : info.inputs[i])
      in.push_back(src < 0 ? graph.input : info.outputs[static_cast<size_t>(src)]);
    auto op = make_cpu_op(n.op);
    DLTUNE_TRY_CTX(op->setup(n, in, info.outputs[i]), "node '" + n.name + "'");
    DLTUNE_TRY(apply_compute(*op, q));
    saved += op->saved_floats(static_cast<int>(B));
    ws = std::max(ws, op->workspace_floats(static_cast<int>(B)));
  }
  int64_t slots = 0;
  for (int64_t s : plan_backward(info, fused).slot_floats) slots += B * s;
  const int64_t one_set = (acts + saved) * F;
  const int64_t local = q.local_batch > 0 ? q.local_batch : B;
  const int64_t input = recipes::numel(graph.input) * F;     // per sample
  const int64_t output = recipes::numel(info.output()) * F;  // per sample
  const int in_flight = std::max(q.in_flight, 1);
  m.activations = q.recompute ? one_set : in_flight * one_set;
  m.workspace = (slots + std::max<int64_t>(ws, 1)) * F;
  const bool pipeline = q.boundary_in || q.boundary_out;
  if (!q.boundary_in) m.communication += local * input;
  if (!q.boundary_out) m.communication += (pipeline ? local : B) * output;
  if (q.boundary_in) m.communication += 2 * local * input;
  if (q.boundary_out) m.communication += local * output;
  m.runtime = q.gpu ? 0 : kCpuBlasBytes;
  return m;
}

std::string memory_text(int64_t bytes) {
  return strings::format_bytes(bytes < 0 ? 0 : static_cast<uint64_t>(bytes));
}

}  // namespace dltune::engine
