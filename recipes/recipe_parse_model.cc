// Parsing of the `model` and `data` sections (recipes/README.md).
#include <cstdlib>
#include <filesystem>

#include "recipes/recipe_parse_internal.h"

namespace dltune::recipes::internal {
namespace {

bool needs_params(LayerKind k) {
  return k == LayerKind::kLinear || k == LayerKind::kConv2d || k == LayerKind::kMaxPool ||
         k == LayerKind::kAvgPool;
}

// Reads the parameters of one layer of kind `kind` from `params` (a mapping or null).
void read_layer_params(YamlReader& r, const YAML::Node& at, const YAML::Node& params,
                       const std::string& path, LayerSpec* l) {
  Fields f;
  bool ok = true;
  switch (l->kind) {
    case LayerKind::kLinear:
      ok = r.fields(params, path, {"out"}, &f);
      r.get_int(f, "out", 1, kMaxInt, &l->out);
      break;
    case LayerKind::kConv2d:
      ok = r.fields(params, path, {"out", "kernel", "stride", "pad", "groups"}, &f);
      r.get_int(f, "out", 1, kMaxInt, &l->out);
      r.get_int(f, "kernel", 1, kMaxInt, &l->kernel);
      r.get_int(f, "stride", 1, kMaxInt, &l->stride);
      r.get_int(f, "pad", 0, kMaxInt, &l->pad);
      r.get_int(f, "groups", 1, kMaxInt, &l->groups);
      break;
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool:
      ok = r.fields(params, path, {"kernel", "stride", "pad"}, &f);
      r.get_int(f, "kernel", 1, kMaxInt, &l->kernel);
      l->stride = l->kernel;  // pools default to non-overlapping windows
      r.get_int(f, "stride", 1, kMaxInt, &l->stride);
      if (r.get_int(f, "pad", 0, kMaxInt, &l->pad) && l->kernel > 0 && 2 * l->pad > l->kernel)
        r.report(*f.find("pad"), "pad " + std::to_string(l->pad) +
                                     " must be at most half the kernel " +
                                     std::to_string(l->kernel));
      break;
    case LayerKind::kDropout:
      ok = r.fields(params, path, {"p"}, &f);
      r.get_number(f, "p", 0, false, 1, true, &l->p);
      break;
    case LayerKind::kLrn:
      ok = r.fields(params, path, {"size", "alpha", "beta", "k"}, &f);
      if (r.get_int(f, "size", 1, kMaxInt, &l->size) && l->size % 2 == 0)
        r.report(*f.find("size"),
                 "expected an odd window size such as 3 or 5, got " + std::to_string(l->size));
      r.get_number(f, "alpha", 0, true, kInf, false, &l->alpha);
      r.get_number(f, "beta", 0, true, kInf, false, &l->beta);
      r.get_number(f, "k", 0, true, kInf, false, &l->k);
      break;
    case LayerKind::kRelu:
    case LayerKind::kFlatten:
      if (!params.IsNull())
        r.report(params, path,
                 std::string(layer_kind_name(l->kind)) + " takes no parameters, " +
                     describe_value(params));
      return;
  }
  if (!ok) return;
  const bool wants_out = l->kind == LayerKind::kLinear || l->kind == LayerKind::kConv2d;
  const bool wants_kernel = needs_params(l->kind) && l->kind != LayerKind::kLinear;
  if (wants_out && !f.has("out")) r.report(at, path, "missing required key 'out'");
  if (wants_kernel && !f.has("kernel")) r.report(at, path, "missing required key 'kernel'");
}

void read_layer(YamlReader& r, const YAML::Node& item, const std::string& path,
                std::vector<LayerSpec>* layers) {
  const std::vector<std::string> kinds = layer_kind_names();
  LayerSpec l;
  std::string kind;
  if (item.IsScalar()) {
    if (!r.scalar_choice(item, path, kinds, &kind)) return;
    l.kind = *parse_layer_kind(kind);
    r.locate(path, item);
    if (needs_params(l.kind)) {
      r.report(item, path,
               kind + " needs parameters: write `- " + kind + ": {" +
                   (l.kind == LayerKind::kLinear   ? "out: N"
                    : l.kind == LayerKind::kConv2d ? "out: N, kernel: K"
                                                   : "kernel: K") +
                   "}`");
      return;
    }
    layers->push_back(l);
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
  l.kind = *parse_layer_kind(kind);
  r.locate(path, key);
  const size_t before = r.problem_count();
  read_layer_params(r, key, item.begin()->second, kpath, &l);
  if (r.problem_count() == before) layers->push_back(l);
}

// `input: [C, H, W]` or `[N]`.
bool read_shape(YamlReader& r, const Fields::Entry& e, Shape* out) {
  if (!e.value.IsSequence() || (e.value.size() != 1 && e.value.size() != 3)) {
    r.report(e, "expected [channels, height, width] or [features], " + describe_value(e.value));
    return false;
  }
  Shape shape;
  for (size_t i = 0; i < e.value.size(); ++i) {
    int64_t d = 0;
    if (!r.scalar_int(e.value[i], e.path + "[" + std::to_string(i) + "]", 1, kMaxInt, &d))
      return false;
    shape.push_back(d);
  }
  *out = shape;
  return true;
}

// mnist / cifar10 `path`: required, resolved against the recipe's directory.
void read_data_path(YamlReader& r, const Fields& f, const YAML::Node& node, const std::string& kind,
                    const std::string& base_dir, DataConfig* d) {
  const Fields::Entry* e = f.find("path");
  std::string path;
  if (e == nullptr) {
    r.report(node, "data", kind + " data needs 'path': the directory holding its files");
    return;
  }
  if (!r.get_string(f, "path", &path)) return;
  if (path.empty()) {
    r.report(*e, "expected a directory path, got an empty string");
    return;
  }
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::absolute(std::filesystem::path(base_dir) / p);
  d->path = p.lexically_normal().string();
}

// `heldout`: a fraction in (0, 0.5], or `test` (the test files of mnist / cifar10).
void read_heldout(YamlReader& r, const Fields::Entry& e, bool synthetic, DataConfig* d) {
  if (e.value.IsScalar() && e.value.Scalar() == "test") {
    if (synthetic)
      r.report(e,
               "'test' needs the test files of mnist or cifar10; synthetic data takes a "
               "fraction such as 0.1");
    d->heldout_test_files = true;
    d->heldout_fraction = 0;
    return;
  }
  double fraction = 0;
  char* end = nullptr;
  const std::string& s = e.value.IsScalar() ? e.value.Scalar() : std::string();
  if (e.value.IsScalar() && e.value.Tag() == "?" && !s.empty())
    fraction = std::strtod(s.c_str(), &end);
  if (end == nullptr || end != s.c_str() + s.size() || !(fraction > 0 && fraction <= 0.5)) {
    r.report(e, "expected a fraction in (0, 0.5] or 'test', " + describe_value(e.value));
    return;
  }
  d->heldout_fraction = fraction;
}

}  // namespace

void parse_model(YamlReader& r, const YAML::Node& node, int64_t classes, ModelConfig* m) {
  const std::vector<std::string> builtins = builtin_model_names();
  if (node.IsScalar()) {
    if (r.scalar_choice(node, "model", builtins, &m->builtin))
      m->layers = *builtin_model(m->builtin, classes);
    return;
  }
  Fields f;
  if (!r.fields(node, "model", {"builtin", "layers", "input", "dtype"}, &f)) return;
  r.get_choice(f, "dtype", {"f32"}, &m->dtype);
  if (const Fields::Entry* e = f.find("input")) read_shape(r, *e, &m->input);
  const Fields::Entry* layers = f.find("layers");
  if (f.has("builtin") && layers != nullptr) {
    r.report(*layers, "give either model.builtin or model.layers, not both");
    return;
  }
  if (f.has("builtin")) {
    if (r.get_choice(f, "builtin", builtins, &m->builtin))
      m->layers = *builtin_model(m->builtin, classes);
    return;
  }
  if (layers == nullptr) {
    r.report(node, "model",
             "needs either builtin (" + strings::join(builtins, ", ") + ") or layers (a list)");
    return;
  }
  if (!layers->value.IsSequence() || layers->value.size() == 0) {
    r.report(*layers, "expected a non-empty list of layers, " + describe_value(layers->value));
    return;
  }
  for (size_t i = 0; i < layers->value.size(); ++i)
    read_layer(r, layers->value[i], "model.layers[" + std::to_string(i) + "]", &m->layers);
}

void parse_data(YamlReader& r, const YAML::Node& node, const std::string& base_dir, DataConfig* d) {
  const std::vector<std::string> kinds = {"synthetic-digits", "synthetic-imagenet", "mnist",
                                          "cifar10"};
  std::string kind;
  Fields f;
  if (node.IsScalar()) {
    if (!r.scalar_choice(node, "data", kinds, &kind)) return;
  } else {
    if (!r.fields(node, "data", {"kind", "path", "samples", "classes", "shape", "heldout"}, &f))
      return;
    if (!f.has("kind")) {
      r.report(node, "data", "missing required key 'kind' (" + strings::join(kinds, ", ") + ")");
      return;
    }
    if (!r.get_choice(f, "kind", kinds, &kind)) return;
  }
  d->kind = *parse_data_kind(kind);
  const bool synthetic = kind.starts_with("synthetic");
  const bool imagenet = d->kind == DataKind::kSyntheticImagenet;
  d->shape = d->kind == DataKind::kCifar10 ? Shape{3, 32, 32}
             : imagenet                    ? Shape{3, 224, 224}
                                           : Shape{1, 28, 28};
  d->classes = imagenet ? 1000 : 10;
  d->samples = !synthetic ? 0 : imagenet ? 4096 : 20000;
  // Keys that only some kinds take.
  auto only_for = [&](const char* key, bool allowed, const std::string& which) {
    if (const Fields::Entry* e = f.find(key); e != nullptr && !allowed)
      r.report(e->key, e->path, "only " + which + " data takes '" + key + "', not " + kind);
  };
  only_for("path", !synthetic, "mnist and cifar10");
  only_for("samples", synthetic, "synthetic");
  only_for("classes", imagenet, "synthetic-imagenet");
  only_for("shape", imagenet, "synthetic-imagenet");
  if (synthetic) r.get_int(f, "samples", 1, kMaxInt, &d->samples);
  if (imagenet) r.get_int(f, "classes", 2, kMaxInt, &d->classes);
  if (const Fields::Entry* e = f.find("shape"); e != nullptr && imagenet) {
    if (e->value.IsSequence() && e->value.size() != 3)
      r.report(*e, "expected [channels, height, width], " + describe_value(e->value));
    else
      read_shape(r, *e, &d->shape);
  }
  if (!synthetic) read_data_path(r, f, node, kind, base_dir, d);
  if (const Fields::Entry* e = f.find("heldout")) read_heldout(r, *e, synthetic, d);
}

}  // namespace dltune::recipes::internal
