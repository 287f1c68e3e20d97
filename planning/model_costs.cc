#include "planning/model_costs.h"

#include "recipes/model/ops.h"

namespace dltune::planning {

Result<ModelCosts> model_costs(const recipes::Graph& graph, const std::string& name) {
  ModelCosts c;
  c.name = name;
  c.info = recipes::analyze_graph(graph);
  if (!c.info.ok()) {
    const auto& [node, message] = c.info.problems.front();
    return invalid_input("model '" + name + "': node " + std::to_string(node) + ": " + message);
  }
  const size_t n = graph.nodes.size();
  c.flops.resize(n);
  c.output_floats.resize(n);
  c.param_floats.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    std::vector<recipes::Shape> in;
    for (int src : c.info.inputs[i]) {
      in.push_back(src < 0 ? graph.input : c.info.outputs[static_cast<size_t>(src)]);
    }
    const recipes::Node& node = graph.nodes[i];
    c.node_names.push_back(node.name);
    c.flops[i] = recipes::op_flops(node.op, node.attrs, in, c.info.outputs[i]);
    c.output_floats[i] = recipes::numel(c.info.outputs[i]);
    c.transformer = c.transformer || node.op == recipes::OpKind::kAttention;
  }
  for (const recipes::TensorInfo& t : c.info.params) {
    c.param_floats[static_cast<size_t>(t.node)] += recipes::numel(t.shape);
  }
  c.flops_per_sample = c.info.flops_per_sample;
  c.parameters = c.info.parameters;
  return c;
}

}  // namespace dltune::planning
