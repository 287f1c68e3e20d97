#include "predict/model_costs.h"

#include <algorithm>
#include <limits>

#include "recipes/model/ops.h"

namespace dltune::predict {

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

std::vector<GradBucket> gradient_buckets(const recipes::GraphInfo& info, uint64_t bucket_bytes) {
  const size_t nodes = info.node_params.size();
  // final_after: each tensor is final after its earliest reader (backward_plan.h).
  std::vector<int> earliest(info.params.size(), std::numeric_limits<int>::max());
  for (size_t i = 0; i < nodes; ++i) {
    for (int t : info.node_params[i]) {
      earliest[static_cast<size_t>(t)] =
          std::min(earliest[static_cast<size_t>(t)], static_cast<int>(i));
    }
  }
  std::vector<std::vector<int>> final_after(nodes);
  for (size_t t = 0; t < earliest.size(); ++t) {
    if (earliest[t] != std::numeric_limits<int>::max()) {
      final_after[static_cast<size_t>(earliest[t])].push_back(static_cast<int>(t));
    }
  }
  const int64_t limit = static_cast<int64_t>(std::max<uint64_t>(bucket_bytes, 4) / 4);
  std::vector<GradBucket> out;
  int64_t begin = 0, end = 0;
  int tensors = 0, last = 0;
  auto close = [&] {
    if (tensors > 0) out.push_back({end - begin, last});
    tensors = 0;
  };
  for (int i = static_cast<int>(nodes) - 1; i >= 0; --i) {
    std::vector<int> fin = final_after[static_cast<size_t>(i)];
    std::sort(fin.begin(), fin.end(), [&](int a, int b) {
      return info.params[static_cast<size_t>(a)].offset >
             info.params[static_cast<size_t>(b)].offset;
    });
    for (int t : fin) {
      const recipes::TensorInfo& p = info.params[static_cast<size_t>(t)];
      const int64_t e = p.offset + recipes::numel(p.shape);
      if (tensors > 0 && e != begin) close();
      if (tensors == 0) end = e;
      begin = p.offset;
      ++tensors;
      last = i;
    }
    if (tensors > 0 && end - begin >= limit) close();
  }
  close();
  return out;
}

}  // namespace dltune::predict
