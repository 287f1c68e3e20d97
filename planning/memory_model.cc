#include "planning/memory_model.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace dltune::planning {

Result<MemoryTerms> estimate_memory(const recipes::Graph& graph, const MemoryQuery& q,
                                    const BatchBuffersFn& buffers) {
  const recipes::GraphInfo info = recipes::analyze_graph(graph);
  if (!info.ok()) {
    const auto& [index, message] = info.problems.front();
    return invalid_input(
        "node " +
        (index < graph.nodes.size() ? "'" + graph.nodes[index].name + "'" : std::to_string(index)) +
        ": " + message);
  }
  if (!buffers) return internal_error("estimate_memory: no executor buffers given");
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
  // One batch's activations, op state and workspace, as the executor allocates them.
  auto one_set = buffers(graph, info, B, q.compute);
  if (!one_set) return one_set.error();
  const BatchBuffers one = *one_set;
  const int64_t local = q.local_batch > 0 ? q.local_batch : B;
  const int64_t input = recipes::numel(graph.input) * F;     // per sample
  const int64_t output = recipes::numel(info.output()) * F;  // per sample
  const int in_flight = std::max(q.in_flight, 1);
  m.activations = (q.recompute ? 1 : in_flight) * one.kept * F;
  m.workspace = one.workspace * F;
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

nlohmann::json memory_json(const MemoryTerms& t) {
  return {{"parameters", t.parameters},
          {"gradients", t.gradients},
          {"optimizer", t.optimizer},
          {"state", t.state},
          {"activations", t.activations},
          {"workspace", t.workspace},
          {"communication", t.communication},
          {"checkpoint", t.checkpoint},
          {"runtime", t.runtime},
          {"total", t.total()},
          {"offloaded_to_host", t.offloaded}};
}

std::string terms_text(const MemoryTerms& t) {
  return "parameters " + memory_text(t.parameters) + ", gradients " + memory_text(t.gradients) +
         ", optimizer " + memory_text(t.optimizer) + ", state " + memory_text(t.state) +
         ", activations " + memory_text(t.activations) + ", workspace " + memory_text(t.workspace) +
         ", communication " + memory_text(t.communication) +
         (t.checkpoint > 0 ? ", checkpoint staging " + memory_text(t.checkpoint) : "") +
         (t.runtime > 0 ? ", BLAS buffers " + memory_text(t.runtime) : "") + ": total " +
         memory_text(t.total()) +
         (t.offloaded > 0 ? " (optimizer state " + memory_text(t.offloaded) + " in host memory)"
                          : "");
}

}  // namespace dltune::planning
