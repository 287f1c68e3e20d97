#include "recipes/model/partition.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>

namespace dltune::recipes {
namespace {

// The sources read from nodes >= k that come from before k (-1: the model's input).
std::set<int> crossing(const GraphInfo& info, int k) {
  std::set<int> out;
  for (size_t j = static_cast<size_t>(k); j < info.inputs.size(); ++j)
    for (int src : info.inputs[j])
      if (src < k) out.insert(src);
  return out;
}

}  // namespace

std::vector<int> cut_points(const GraphInfo& info) {
  std::vector<int> out;
  const int n = static_cast<int>(info.inputs.size());
  for (int k = 1; k < n; ++k) {
    const std::set<int> x = crossing(info, k);
    if (x.size() == 1 && *x.begin() >= 0) out.push_back(k);
  }
  return out;
}

Result<Stage> make_stage(const Graph& graph, const GraphInfo& info, int begin, int end) {
  const int n = static_cast<int>(graph.nodes.size());
  if (begin < 0 || end > n || begin >= end)
    return invalid_input("stage [" + std::to_string(begin) + ", " + std::to_string(end) +
                         ") is not a range of the " + std::to_string(n) + " nodes");
  Stage s;
  s.begin = begin;
  s.end = end;
  s.graph.input = graph.input;
  s.graph.input_kind = graph.input_kind;
  if (begin > 0) {
    const std::set<int> x = crossing(info, begin);
    if (x.size() != 1 || *x.begin() < 0)
      return invalid_input("the model cannot be cut before node '" +
                           graph.nodes[static_cast<size_t>(begin)].name +
                           "': " + std::to_string(x.size()) +
                           " tensors cross there (a stage boundary needs exactly one)");
    s.input_node = *x.begin();
    s.graph.input = info.outputs[static_cast<size_t>(s.input_node)];
    s.graph.input_kind = InputKind::kFloat;
  }
  for (int i = begin; i < end; ++i) {
    Node node = graph.nodes[static_cast<size_t>(i)];
    // Explicit inputs: the crossing tensor becomes the stage's input.
    std::vector<int> srcs = info.inputs[static_cast<size_t>(i)];
    node.from.clear();
    for (int src : srcs)
      node.from.push_back(src < 0 || src < begin ? std::string(kGraphInput)
                                                 : graph.nodes[static_cast<size_t>(src)].name);
    if (node.op == OpKind::kLinear && !node.attrs.tie.empty()) {
      // The tied tensor's owner: the node whose parameter it is.
      const std::string owner = node.attrs.tie.substr(0, node.attrs.tie.rfind('.'));
      const int o = find_node(graph, owner);
      if (o >= 0 && o < begin) {
        s.shared.emplace_back(node.name + ".weight", node.attrs.tie);
        node.attrs.tie.clear();
      }
    }
    s.graph.nodes.push_back(std::move(node));
  }
  return s;
}

std::vector<std::string> partition_names(const Graph& graph, const std::vector<int>& firsts) {
  std::vector<std::string> out;
  for (int f : firsts) out.push_back(graph.nodes[static_cast<size_t>(f)].name);
  return out;
}

Result<std::vector<int>> partition_nodes(const Graph& graph, const GraphInfo& info,
                                         const std::vector<std::string>& names) {
  const std::vector<int> cuts = cut_points(info);
  std::vector<int> out;
  for (size_t s = 0; s < names.size(); ++s) {
    const int i = find_node(graph, names[s]);
    if (i < 0) return invalid_input("partition: '" + names[s] + "' is not a node of the model");
    if (s == 0 && i != 0)
      return invalid_input("partition: the first stage must start at the first node '" +
                           graph.nodes.front().name + "', not '" + names[s] + "'");
    if (s > 0 && std::find(cuts.begin(), cuts.end(), i) == cuts.end())
      return invalid_input("partition: the model cannot be cut before '" + names[s] +
                           "' (more than one tensor crosses there)");
    if (s > 0 && i <= out.back())
      return invalid_input("partition: stages must start in node order; '" + names[s] +
                           "' comes before '" + names[s - 1] + "'");
    out.push_back(i);
  }
  return out;
}

Result<std::vector<int>> balanced_partition(const GraphInfo& info, const std::vector<double>& cost,
                                            int stages, const std::function<bool(int, int)>& fits) {
  const int n = static_cast<int>(info.inputs.size());
  if (stages == 1) return std::vector<int>{0};
  std::vector<int> points = {0};
  for (int k : cut_points(info)) points.push_back(k);
  points.push_back(n);
  const int c = static_cast<int>(points.size());
  if (c - 1 < stages)
    return invalid_input("the model has " + std::to_string(c - 2) +
                         " places where one tensor crosses, too few for " + std::to_string(stages) +
                         " stages");
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0.0);
  for (int i = 0; i < n; ++i)
    prefix[static_cast<size_t>(i) + 1] =
        prefix[static_cast<size_t>(i)] + cost[static_cast<size_t>(i)];
  auto span = [&](int a, int b) {  // cost of stage points[a]..points[b]
    return prefix[static_cast<size_t>(points[static_cast<size_t>(b)])] -
           prefix[static_cast<size_t>(points[static_cast<size_t>(a)])];
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[s][j]: the smallest largest-stage cost of s stages covering points[0]..points[j].
  std::vector<std::vector<double>> best(static_cast<size_t>(stages) + 1,
                                        std::vector<double>(static_cast<size_t>(c), inf));
  std::vector<std::vector<int>> from(static_cast<size_t>(stages) + 1,
                                     std::vector<int>(static_cast<size_t>(c), -1));
  best[0][0] = 0.0;
  for (int s = 1; s <= stages; ++s)
    for (int j = s; j < c; ++j)
      for (int i = s - 1; i < j; ++i) {
        const double prev = best[static_cast<size_t>(s - 1)][static_cast<size_t>(i)];
        if (prev == inf) continue;
        if (fits && !fits(points[static_cast<size_t>(i)], points[static_cast<size_t>(j)])) continue;
        const double v = std::max(prev, span(i, j));
        if (v < best[static_cast<size_t>(s)][static_cast<size_t>(j)]) {
          best[static_cast<size_t>(s)][static_cast<size_t>(j)] = v;
          from[static_cast<size_t>(s)][static_cast<size_t>(j)] = i;
        }
      }
  if (best[static_cast<size_t>(stages)][static_cast<size_t>(c - 1)] == inf)
    return invalid_input("no cut of the model into " + std::to_string(stages) +
                         " stages fits every stage's memory");
  std::vector<int> firsts(static_cast<size_t>(stages));
  int j = c - 1;
  for (int s = stages; s >= 1; --s) {
    const int i = from[static_cast<size_t>(s)][static_cast<size_t>(j)];
    firsts[static_cast<size_t>(s - 1)] = points[static_cast<size_t>(i)];
    j = i;
  }
  return firsts;
}

}  // namespace dltune::recipes
