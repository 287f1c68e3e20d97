// Parsing of the `model` section (recipes/README.md): a built-in name, a `layers:` chain or a
// `nodes:` graph, with every op's attributes read through the op table (recipes/model/ops.h).
#include <map>

#include "recipes/recipe_parse_internal.h"

namespace dltune::recipes::internal {
namespace {

const std::vector<std::string> kBools = {"true", "false"};
const std::vector<std::string> kInits = {"default", "he", "normal"};

bool get_bool(YamlReader& r, const Fields& f, std::string_view key, bool* out) {
  std::string v;
  if (!f.has(key)) return true;
  if (!r.get_choice(f, key, kBools, &v)) return false;
  *out = v == "true";
  return true;
}

// Reads the attributes of op `kind` present in `f` into `a`; `given` lists their names.
void read_attrs(YamlReader& r, const Fields& f, OpKind kind, OpAttrs* a,
                std::vector<std::string>* given) {
  for (const AttrDef& d : op_def(kind).attrs) {
    if (!f.has(d.name)) continue;
    given->push_back(d.name);
    switch (d.type) {
      case AttrDef::Type::kInt: {
        int64_t v = 0;
        if (r.get_int(f, d.name, static_cast<int64_t>(d.min), static_cast<int64_t>(d.max), &v))
          set_attr_number(*a, d, static_cast<double>(v));
        break;
      }
      case AttrDef::Type::kNumber: {
        double v = 0;
        if (r.get_number(f, d.name, d.min, d.min_open, d.max, d.max_open, &v))
          set_attr_number(*a, d, v);
        break;
      }
      case AttrDef::Type::kBool: {
        bool v = false;
        if (get_bool(r, f, d.name, &v)) set_attr_number(*a, d, v ? 1.0 : 0.0);
        break;
      }
      case AttrDef::Type::kString: {
        std::string v;
        const bool ok = std::string_view(d.name) == "init" ? r.get_choice(f, d.name, kInits, &v)
                                                           : r.get_string(f, d.name, &v);
        if (ok) set_attr_string(*a, d, v == "default" ? "" : v);
        break;
      }
    }
  }
  apply_attr_defaults(kind, *a, *given);
}

// Checks of one op's attributes that need no shapes, reported at the attribute.
void check_attrs(YamlReader& r, const Fields& f, OpKind kind, const OpAttrs& a) {
  if (kind == OpKind::kLrn && f.has("size") && a.size % 2 == 0)
    r.report(*f.find("size"),
             "expected an odd window size such as 3 or 5, got " + std::to_string(a.size));
  const bool pool = kind == OpKind::kMaxPool || kind == OpKind::kAvgPool;
  if (pool && f.has("pad") && a.kernel > 0 && 2 * a.pad > a.kernel)
    r.report(*f.find("pad"), "pad " + std::to_string(a.pad) + " must be at most half the kernel " +
                                 std::to_string(a.kernel));
}

std::vector<std::string> attr_names(OpKind kind) {
  std::vector<std::string> out;
  for (const AttrDef& d : op_def(kind).attrs) out.emplace_back(d.name);
  return out;
}

// "out: N, kernel: K" for the required attributes of `kind`.
std::string required_example(OpKind kind) {
  std::string out;
  for (const AttrDef& d : op_def(kind).attrs) {
    if (!d.required) continue;
    std::string letter(1, static_cast<char>(std::toupper(d.name[0])));
    if (std::string_view(d.name) == "out") letter = "N";
    out += (out.empty() ? "" : ", ") + std::string(d.name) + ": " + letter;
  }
  return out;
}

bool has_required(OpKind kind) {
  for (const AttrDef& d : op_def(kind).attrs)
    if (d.required) return true;
  return false;
}

void report_missing(YamlReader& r, const YAML::Node& at, const std::string& path, OpKind kind,
                    const Fields& f) {
  for (const AttrDef& d : op_def(kind).attrs)
    if (d.required && !f.has(d.name))
      r.report(at, path, std::string("missing required key '") + d.name + "'");
}

// One item of a `layers:` list: `- relu` or `- conv2d: {out: 20, kernel: 5}`.
void read_layer(YamlReader& r, const YAML::Node& item, const std::string& path,
                std::vector<Node>* layers) {
  const std::vector<std::string> kinds = op_names(true);
  Node n;
  std::string kind;
  if (item.IsScalar()) {
    if (!r.scalar_choice(item, path, kinds, &kind)) return;
    n.op = *parse_op_kind(kind);
    r.locate(path, item);
    if (has_required(n.op)) {
      r.report(
          item, path,
          kind + " needs parameters: write `- " + kind + ": {" + required_example(n.op) + "}`");
      return;
    }
    apply_attr_defaults(n.op, n.attrs, {});
    layers->push_back(n);
    return;
  }
  if (!item.IsMap() || item.size() != 1) {
    r.report(item, path,
             "expected a layer such as `relu` or `conv2d: {out: 20, kernel: 5}` (one key per "
             "list item), " +
                 describe_value(item));
    return;
  }
  const YAML::Node key = item.begin()->first;
  const std::string kpath = path + "." + (key.IsScalar() ? key.Scalar() : "?");
  if (!r.scalar_choice(key, path, kinds, &kind)) return;
  n.op = *parse_op_kind(kind);
  r.locate(path, key);
  const YAML::Node params = item.begin()->second;
  const size_t before = r.problem_count();
  if (op_def(n.op).attrs.empty()) {
    if (!params.IsNull())
      r.report(params, kpath, kind + " takes no parameters, " + describe_value(params));
    if (r.problem_count() == before) layers->push_back(n);
    return;
  }
  Fields f;
  if (!r.fields(params, kpath, attr_names(n.op), &f)) return;
  std::vector<std::string> given;
  read_attrs(r, f, n.op, &n.attrs, &given);
  check_attrs(r, f, n.op, n.attrs);
  report_missing(r, key, kpath, n.op, f);
  if (r.problem_count() == before) layers->push_back(n);
}

// One item of a `nodes:` list: {name: N, op: OP, from: [A, B], <attributes of OP>}.
void read_node(YamlReader& r, const YAML::Node& item, const std::string& path,
               std::vector<Node>* nodes) {
  if (!item.IsMap() || !item["op"]) {
    r.report(
        item, path,
        "expected a node such as {name: conv1, op: conv2d, out: 16, kernel: 3} with an 'op', " +
            describe_value(item));
    return;
  }
  Node n;
  std::string kind;
  const YAML::Node op = item["op"];
  if (!r.scalar_choice(op, path + ".op", op_names(), &kind)) return;
  n.op = *parse_op_kind(kind);
  std::vector<std::string> allowed = {"name", "op", "from"};
  for (const std::string& a : attr_names(n.op)) allowed.push_back(a);
  Fields f;
  const size_t before = r.problem_count();
  if (!r.fields(item, path, allowed, &f)) return;
  r.locate(path, item);
  r.get_string(f, "name", &n.name);
  if (const Fields::Entry* e = f.find("from")) {
    if (e->value.IsScalar()) {
      n.from.push_back(e->value.Scalar());
    } else if (e->value.IsSequence() && e->value.size() > 0) {
      for (size_t i = 0; i < e->value.size(); ++i) {
        std::string name;
        if (r.scalar_string(e->value[i], e->path + "[" + std::to_string(i) + "]", &name))
          n.from.push_back(name);
      }
    } else {
      r.report(*e, "expected a node name or a list of node names, " + describe_value(e->value));
    }
  }
  std::vector<std::string> given;
  read_attrs(r, f, n.op, &n.attrs, &given);
  check_attrs(r, f, n.op, n.attrs);
  report_missing(r, item, path, n.op, f);
  if (r.problem_count() == before) nodes->push_back(std::move(n));
}

// `input: [C, H, W]`, `[T]` or `[N]`.
bool read_shape(YamlReader& r, const Fields::Entry& e, Shape* out) {
  if (!e.value.IsSequence() || e.value.size() < 1 || e.value.size() > 4) {
    r.report(e, "expected [channels, height, width], [features] or [context], " +
                    describe_value(e.value));
    return false;
  }
  Shape shape;
  for (size_t i = 0; i < e.value.size(); ++i) {
    int64_t d = 0;
    if (!r.scalar_int(e.value[i], e.path + "[" + std::to_string(i) + "]", 1, int64_t{1} << 31, &d))
      return false;
    shape.push_back(d);
  }
  *out = shape;
  return true;
}

void read_list(YamlReader& r, const Fields::Entry& e, bool chain, std::vector<Node>* out) {
  if (!e.value.IsSequence() || e.value.size() == 0) {
    r.report(e, std::string("expected a non-empty list of ") + (chain ? "layers" : "nodes") + ", " +
                    describe_value(e.value));
    return;
  }
  for (size_t i = 0; i < e.value.size(); ++i) {
    const std::string path = e.path + "[" + std::to_string(i) + "]";
    if (chain)
      read_layer(r, e.value[i], path, out);
    else
      read_node(r, e.value[i], path, out);
  }
  if (chain) return;
  std::map<OpKind, int> counts;  // unnamed nodes: "<op><k>", as in a chain
  for (Node& n : *out) {
    const int k = ++counts[n.op];
    if (n.name.empty()) n.name = std::string(op_name(n.op)) + std::to_string(k);
  }
}

}  // namespace

void parse_model(YamlReader& r, const YAML::Node& node, ModelConfig* m) {
  const std::vector<std::string> builtins = builtin_model_names();
  if (node.IsScalar()) {
    if (r.scalar_choice(node, "model", builtins, &m->builtin)) m->form = ModelForm::kBuiltin;
    return;
  }
  Fields f;
  if (!r.fields(node, "model",
                {"builtin", "layers", "nodes", "input", "dtype", "blocks", "width", "heads",
                 "context", "vocab"},
                &f))
    return;
  r.get_choice(f, "dtype", {"f32"}, &m->dtype);
  if (const Fields::Entry* e = f.find("input")) read_shape(r, *e, &m->input);
  const Fields::Entry* layers = f.find("layers");
  const Fields::Entry* nodes = f.find("nodes");
  if (f.has("builtin") && (layers != nullptr || nodes != nullptr)) {
    r.report(layers ? *layers : *nodes, std::string("give either model.builtin or model.") +
                                            (layers ? "layers" : "nodes") + ", not both");
    return;
  }
  if (layers != nullptr && nodes != nullptr) {
    r.report(*nodes, "give either model.layers (a chain) or model.nodes (a graph), not both");
    return;
  }
  const bool gpt = f.has("builtin") && f.find("builtin")->value.IsScalar() &&
                   is_gpt(f.find("builtin")->value.Scalar());
  struct Knob {
    const char* key;
    int64_t* value;
  };
  const Knob knobs[] = {{"blocks", &m->options.blocks},
                        {"width", &m->options.width},
                        {"heads", &m->options.heads},
                        {"context", &m->options.context},
                        {"vocab", &m->options.vocab}};
  for (const Knob& k : knobs) {
    const Fields::Entry* e = f.find(k.key);
    if (e == nullptr) continue;
    if (!gpt)
      r.report(e->key, e->path,
               std::string("only the GPT built-ins (gpt-tiny, gpt2-small) take '") + k.key + "'");
    else
      r.get_int(f, k.key, 1, int64_t{1} << 24, k.value);
  }
  if (f.has("builtin")) {
    if (r.get_choice(f, "builtin", builtins, &m->builtin)) m->form = ModelForm::kBuiltin;
    if (gpt && m->options.width > 0 && m->options.heads > 0 &&
        m->options.width % m->options.heads != 0)
      r.report(*f.find("heads"), "heads " + std::to_string(m->options.heads) +
                                     " must divide the width " + std::to_string(m->options.width));
    return;
  }
  if (layers == nullptr && nodes == nullptr) {
    r.report(node, "model",
             "needs builtin (" + strings::join(builtins, ", ") +
                 "), layers (a chain) or nodes (a graph)");
    return;
  }
  m->form = layers ? ModelForm::kLayers : ModelForm::kNodes;
  read_list(r, layers ? *layers : *nodes, layers != nullptr, &m->nodes);
}

void build_model_graph(Recipe* recipe) {
  ModelConfig& m = recipe->model;
  const DataConfig& d = recipe->data;
  if (m.input.empty()) m.input = d.shape;
  switch (m.form) {
    case ModelForm::kBuiltin: {
      if (m.builtin.empty()) return;  // parsing reported why
      BuiltinOptions o = m.options;
      o.classes = d.classes;
      o.input = m.input;
      const bool tokens = d.kind == DataKind::kText || d.kind == DataKind::kTokens;
      if (is_gpt(m.builtin) && o.vocab == 0 && tokens) o.vocab = d.classes;
      m.graph = *builtin_graph(m.builtin, o);
      break;
    }
    case ModelForm::kLayers:
      m.graph = chain_graph(m.input, m.nodes);
      break;
    case ModelForm::kNodes:
      m.graph = Graph{m.input, InputKind::kFloat, m.nodes};
      break;
  }
  m.graph.input = m.input;
  if (d.kind == DataKind::kText || d.kind == DataKind::kTokens)
    m.graph.input_kind = InputKind::kTokens;
}

}  // namespace dltune::recipes::internal
