#include "recipes/model/graph.h"

#include <map>

#include <nlohmann/json.hpp>

namespace dltune::recipes {
namespace {

using json = nlohmann::json;

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 200) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

}  // namespace

int find_node(const Graph& graph, const std::string& name) {
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (graph.nodes[i].name == name) return static_cast<int>(i);
  return -1;
}

GraphInfo analyze_graph(const Graph& g) {
  GraphInfo info;
  auto problem = [&](size_t i, std::string m) {
    info.problems.emplace_back(i, std::move(m));
    return info;
  };
  if (g.nodes.empty()) return problem(0, "has no nodes");
  for (int64_t d : g.input)
    if (d <= 0) return problem(0, "input shape " + describe_shape(g.input) + " is not positive");
  std::map<std::string, int> index;  // node name -> index
  std::map<std::string, int> param_index;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!valid_name(n.name))
      return problem(i,
                     "node name '" + n.name + "' must be 1-200 letters, digits, '.', '_' or '-'");
    if (n.name == kGraphInput || index.count(n.name))
      return problem(i, "node name '" + n.name + "' is used twice" +
                            (n.name == kGraphInput ? " (input names the model's input)" : ""));
    std::vector<int> from;
    std::vector<Shape> in;
    if (n.from.empty()) {
      from.push_back(static_cast<int>(i) - 1);
    } else {
      for (const std::string& f : n.from) {
        if (f == kGraphInput) {
          from.push_back(-1);
          continue;
        }
        auto it = index.find(f);
        if (it == index.end())
          return problem(i, "reads '" + f + "', which is not " +
                                (find_node(g, f) >= 0 ? "listed before it (list nodes in order)"
                                                      : "a node of this model"));
        from.push_back(it->second);
      }
    }
    for (int f : from) {
      const bool tokens = f < 0 && g.input_kind == InputKind::kTokens;
      if (tokens != (n.op == OpKind::kEmbedding))
        return problem(i, tokens ? std::string(op_name(n.op)) +
                                       " cannot read token ids; start the model with an embedding"
                                 : "embedding reads token ids: only the input of a text model");
      in.push_back(f < 0 ? g.input : info.outputs[static_cast<size_t>(f)]);
    }
    InferResult r = infer_shape(n.op, n.attrs, in);
    if (!r.problem.empty()) return problem(i, r.problem);
    for (int64_t d : r.out)
      if (d <= 0 || d > (int64_t{1} << 31))
        return problem(i, "output shape " + describe_shape(r.out) + " is out of range");
    std::vector<int> uses, holds;
    if (n.op == OpKind::kLinear && !n.attrs.tie.empty()) {
      auto it = param_index.find(n.attrs.tie);
      const int64_t f = n.attrs.flatten ? numel(in[0]) : in[0].back();
      const Shape want{n.attrs.out, f};
      if (it == param_index.end())
        return problem(i, "tie names '" + n.attrs.tie +
                              "', which is not a parameter of a node listed before it");
      if (info.params[static_cast<size_t>(it->second)].shape != want)
        return problem(i, "tie '" + n.attrs.tie + "' has shape " +
                              describe_shape(info.params[static_cast<size_t>(it->second)].shape) +
                              " but this linear needs a weight of " + describe_shape(want));
      uses.push_back(it->second);
    }
    for (ParamDef& d : op_params(n.op, n.attrs, in)) {
      TensorInfo t{n.name + "." + d.name, d.shape, static_cast<int>(i), d, 0};
      const int64_t count = numel(d.shape);
      if (d.trainable) {
        t.offset = info.parameters;
        info.parameters += count;
        param_index[t.name] = static_cast<int>(info.params.size());
        uses.push_back(static_cast<int>(info.params.size()));
        info.params.push_back(std::move(t));
      } else {
        t.offset = info.state_floats;
        info.state_floats += count;
        holds.push_back(static_cast<int>(info.state.size()));
        info.state.push_back(std::move(t));
      }
      if (info.parameters > (int64_t{1} << 40))
        return problem(i, "has more than 2^40 parameters in all");
    }
    info.flops_per_sample += op_flops(n.op, n.attrs, in, r.out);
    index[n.name] = static_cast<int>(i);
    info.inputs.push_back(std::move(from));
    info.outputs.push_back(std::move(r.out));
    info.node_params.push_back(std::move(uses));
    info.node_state.push_back(std::move(holds));
  }
  return info;
}

json graph_to_json(const Graph& g) {
  json nodes = json::array();
  for (const Node& n : g.nodes) {
    json j = {{"name", n.name}, {"op", std::string(op_name(n.op))}};
    if (!n.from.empty()) j["from"] = n.from;
    for (const AttrDef& a : op_def(n.op).attrs) {
      switch (a.type) {
        case AttrDef::Type::kInt:
          j[a.name] = static_cast<int64_t>(attr_number(n.attrs, a));
          break;
        case AttrDef::Type::kNumber:
          j[a.name] = attr_number(n.attrs, a);
          break;
        case AttrDef::Type::kBool:
          j[a.name] = attr_number(n.attrs, a) != 0.0;
          break;
        case AttrDef::Type::kString:
          if (!attr_string(n.attrs, a).empty()) j[a.name] = attr_string(n.attrs, a);
          break;
      }
    }
    nodes.push_back(std::move(j));
  }
  return {{"input", g.input},
          {"input_kind", g.input_kind == InputKind::kTokens ? "tokens" : "float"},
          {"nodes", std::move(nodes)}};
}

Result<Graph> graph_from_json(const json& j) {
  auto bad = [](const std::string& m) { return invalid_input("model graph: " + m); };
  if (!j.is_object() || !j.contains("nodes") || !j["nodes"].is_array())
    return bad("expected an object with a 'nodes' list");
  Graph g;
  if (!j.contains("input") || !j["input"].is_array()) return bad("expected 'input': [dims]");
  for (const json& d : j["input"]) {
    if (!d.is_number_integer()) return bad("'input' must hold integers");
    g.input.push_back(d.get<int64_t>());
  }
  const std::string kind = j.value("input_kind", std::string("float"));
  if (kind != "float" && kind != "tokens") return bad("'input_kind' must be float or tokens");
  g.input_kind = kind == "tokens" ? InputKind::kTokens : InputKind::kFloat;
  for (const json& jn : j["nodes"]) {
    if (!jn.is_object()) return bad("every node must be an object");
    Node n;
    if (!jn.contains("name") || !jn["name"].is_string()) return bad("a node lacks its 'name'");
    n.name = jn["name"].get<std::string>();
    const std::string where = "node '" + n.name + "': ";
    if (!jn.contains("op") || !jn["op"].is_string()) return bad(where + "lacks its 'op'");
    auto op = parse_op_kind(jn["op"].get<std::string>());
    if (!op) return bad(where + "unknown op '" + jn["op"].get<std::string>() + "'");
    n.op = *op;
    std::vector<std::string> given;
    for (const auto& [key, value] : jn.items()) {
      if (key == "name" || key == "op") continue;
      if (key == "from") {
        if (!value.is_array()) return bad(where + "'from' must be a list of names");
        for (const json& f : value) {
          if (!f.is_string()) return bad(where + "'from' must be a list of names");
          n.from.push_back(f.get<std::string>());
        }
        continue;
      }
      const AttrDef* def = nullptr;
      for (const AttrDef& a : op_def(n.op).attrs)
        if (key == a.name) def = &a;
      if (def == nullptr) return bad(where + "unknown key '" + key + "'");
      given.push_back(key);
      if (def->type == AttrDef::Type::kString) {
        if (!value.is_string()) return bad(where + "'" + key + "' must be a string");
        set_attr_string(n.attrs, *def, value.get<std::string>());
      } else if (def->type == AttrDef::Type::kBool) {
        if (!value.is_boolean()) return bad(where + "'" + key + "' must be true or false");
        set_attr_number(n.attrs, *def, value.get<bool>() ? 1.0 : 0.0);
      } else {
        if (!value.is_number()) return bad(where + "'" + key + "' must be a number");
        const double v = value.get<double>();
        if (!(v >= def->min && v <= def->max))
          return bad(where + "'" + key + "' is out of range: " + value.dump());
        set_attr_number(n.attrs, *def, v);
      }
    }
    apply_attr_defaults(n.op, n.attrs, given);
    g.nodes.push_back(std::move(n));
  }
  return g;
}

std::string describe_graph(const Graph& g) {
  std::string out = "input " + describe_shape(g.input) +
                    (g.input_kind == InputKind::kTokens ? " tokens\n" : "\n");
  for (const Node& n : g.nodes) {
    out += n.name + " " + describe_op(n.op, n.attrs, true);
    if (!n.from.empty()) {
      out += " <-";
      for (const auto& f : n.from) out += " " + f;
    }
    out += "\n";
  }
  return out;
}

}  // namespace dltune::recipes
