#include "recipes/model.h"

#include <array>
#include <sstream>
#include <utility>

namespace dltune::recipes {
namespace {

constexpr std::array<std::pair<LayerKind, std::string_view>, 8> kKinds{{
    {LayerKind::kLinear, "linear"},
    {LayerKind::kConv2d, "conv2d"},
    {LayerKind::kMaxPool, "maxpool"},
    {LayerKind::kAvgPool, "avgpool"},
    {LayerKind::kRelu, "relu"},
    {LayerKind::kDropout, "dropout"},
    {LayerKind::kLrn, "lrn"},
    {LayerKind::kFlatten, "flatten"},
}};

LayerSpec linear(int64_t out) {
  LayerSpec l;
  l.kind = LayerKind::kLinear;
  l.out = out;
  return l;
}
LayerSpec conv(int64_t out, int64_t kernel, int64_t stride = 1, int64_t pad = 0,
               int64_t groups = 1) {
  LayerSpec l;
  l.kind = LayerKind::kConv2d;
  l.out = out;
  l.kernel = kernel;
  l.stride = stride;
  l.pad = pad;
  l.groups = groups;
  return l;
}
LayerSpec pool(LayerKind kind, int64_t kernel, int64_t stride, int64_t pad = 0) {
  LayerSpec l;
  l.kind = kind;
  l.kernel = kernel;
  l.stride = stride;
  l.pad = pad;
  return l;
}
LayerSpec simple(LayerKind kind) {
  LayerSpec l;
  l.kind = kind;
  return l;
}

std::vector<LayerSpec> alexnet(int64_t classes) {
  const LayerSpec relu = simple(LayerKind::kRelu);
  const LayerSpec lrn = simple(LayerKind::kLrn);  // size 5, alpha 1e-4, beta 0.75, k 1
  const LayerSpec maxpool = pool(LayerKind::kMaxPool, 3, 2);
  const LayerSpec dropout = simple(LayerKind::kDropout);
  return {conv(96, 11, 4),
          relu,
          lrn,
          maxpool,
          conv(256, 5, 1, 2, 2),
          relu,
          lrn,
          maxpool,
          conv(384, 3, 1, 1),
          relu,
          conv(384, 3, 1, 1, 2),
          relu,
          conv(256, 3, 1, 1, 2),
          relu,
          maxpool,
          linear(4096),
          relu,
          dropout,
          linear(4096),
          relu,
          dropout,
          linear(classes)};
}

// Sizes come from the recipe: products saturate at kTooLarge instead of wrapping around (a
// class count of 2^63-1 once gave a negative parameter count), and apply_layer reports them.
constexpr int64_t kTooLarge = int64_t{1} << 50;

int64_t mul_sat(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > kTooLarge || r < 0) return kTooLarge;
  return r;
}

int64_t add_sat(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r) || r > kTooLarge || r < 0) return kTooLarge;
  return r;
}

// Conv or pool output size along one dimension; <= 0 when the window does not fit.
int64_t window_out(int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  const int64_t span = add_sat(in, mul_sat(2, pad)) - kernel;
  if (span < 0) return 0;
  return span / stride + 1;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n = mul_sat(n, d);
  return n;
}

std::string too_large(const std::string& name) {
  return name + " makes the model too large (2^50 or more parameters or values per sample); " +
         "use smaller layers or inputs";
}

// Output shape and parameter count of one layer, or an error message.
std::string apply_layer(const LayerSpec& l, Shape& shape, int64_t& params) {
  const bool image = shape.size() == 3;
  const std::string name(layer_kind_name(l.kind));
  switch (l.kind) {
    case LayerKind::kLinear:
      params = add_sat(params, add_sat(mul_sat(numel(shape), l.out), l.out));
      shape = {l.out};
      return params >= kTooLarge ? too_large(name) : "";
    case LayerKind::kFlatten:
      shape = {numel(shape)};
      return shape[0] >= kTooLarge ? too_large(name) : "";
    case LayerKind::kRelu:
    case LayerKind::kDropout:
      return "";
    case LayerKind::kLrn:
      if (!image) return "lrn needs a (C,H,W) input, got " + describe_shape(shape);
      return "";
    case LayerKind::kConv2d:
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool: {
      if (!image)
        return name + " needs a (C,H,W) input, got the flat vector " + describe_shape(shape) +
               "; put convolution and pooling layers before linear and flatten";
      const int64_t h = window_out(shape[1], l.kernel, l.stride, l.pad);
      const int64_t w = window_out(shape[2], l.kernel, l.stride, l.pad);
      if (h <= 0 || w <= 0)
        return name + " kernel " + std::to_string(l.kernel) + " does not fit the input " +
               describe_shape(shape) + " with pad " + std::to_string(l.pad) +
               "; use a smaller kernel, more padding or fewer pooling layers before it";
      if (l.kind != LayerKind::kConv2d) {
        shape = {shape[0], h, w};
        return "";
      }
      if (shape[0] % l.groups != 0 || l.out % l.groups != 0)
        return "conv2d groups " + std::to_string(l.groups) +
               " must divide both the input channels " + std::to_string(shape[0]) + " and out " +
               std::to_string(l.out);
      params = add_sat(
          params, add_sat(mul_sat(mul_sat(shape[0] / l.groups, l.kernel), mul_sat(l.kernel, l.out)),
                          l.out));
      shape = {l.out, h, w};
      return params >= kTooLarge || numel(shape) >= kTooLarge ? too_large(name) : "";
    }
  }
  return "unknown layer kind";
}

}  // namespace

std::string_view layer_kind_name(LayerKind kind) {
  for (const auto& [k, name] : kKinds)
    if (k == kind) return name;
  return "?";
}

std::optional<LayerKind> parse_layer_kind(std::string_view s) {
  for (const auto& [k, name] : kKinds)
    if (name == s) return k;
  return std::nullopt;
}

std::vector<std::string> layer_kind_names() {
  std::vector<std::string> out;
  for (const auto& entry : kKinds) out.emplace_back(entry.second);
  return out;
}

std::string describe_layer(const LayerSpec& l) {
  std::ostringstream os;
  os << layer_kind_name(l.kind);
  switch (l.kind) {
    case LayerKind::kLinear:
      os << "(out=" << l.out << ")";
      break;
    case LayerKind::kConv2d:
      os << "(out=" << l.out << ", kernel=" << l.kernel << ", stride=" << l.stride
         << ", pad=" << l.pad << ", groups=" << l.groups << ")";
      break;
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool:
      os << "(kernel=" << l.kernel << ", stride=" << l.stride << ", pad=" << l.pad << ")";
      break;
    case LayerKind::kDropout:
      os << "(p=" << l.p << ")";
      break;
    case LayerKind::kLrn:
      os << "(size=" << l.size << ", alpha=" << l.alpha << ", beta=" << l.beta << ", k=" << l.k
         << ")";
      break;
    case LayerKind::kRelu:
    case LayerKind::kFlatten:
      break;
  }
  return os.str();
}

std::string describe_shape(const Shape& shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += "x";
    out += std::to_string(shape[i]);
  }
  return out;
}

std::vector<std::string> builtin_model_names() {
  return {"mlp", "lenet", "lenet5", "alexnet", "cifar-cnn"};
}

std::optional<std::vector<LayerSpec>> builtin_model(std::string_view name, int64_t classes) {
  const LayerSpec relu = simple(LayerKind::kRelu);
  if (name == "mlp")
    return std::vector<LayerSpec>{
        simple(LayerKind::kFlatten), linear(512), relu, linear(256), relu, linear(classes)};
  if (name == "lenet")
    return std::vector<LayerSpec>{conv(20, 5),    pool(LayerKind::kMaxPool, 2, 2),
                                  conv(50, 5),    pool(LayerKind::kMaxPool, 2, 2),
                                  linear(500),    relu,
                                  linear(classes)};
  if (name == "lenet5")
    return std::vector<LayerSpec>{conv(6, 5, 1, 2),
                                  relu,
                                  pool(LayerKind::kAvgPool, 2, 2),
                                  conv(16, 5),
                                  relu,
                                  pool(LayerKind::kAvgPool, 2, 2),
                                  linear(120),
                                  relu,
                                  linear(84),
                                  relu,
                                  linear(classes)};
  if (name == "alexnet") return alexnet(classes);
  if (name == "cifar-cnn")
    return std::vector<LayerSpec>{conv(32, 5, 1, 2),
                                  pool(LayerKind::kMaxPool, 3, 2, 1),
                                  relu,
                                  conv(32, 5, 1, 2),
                                  relu,
                                  pool(LayerKind::kAvgPool, 3, 2, 1),
                                  conv(64, 5, 1, 2),
                                  relu,
                                  pool(LayerKind::kAvgPool, 3, 2, 1),
                                  linear(64),
                                  linear(classes)};
  return std::nullopt;
}

ShapeCheck check_shapes(const std::vector<LayerSpec>& layers, const Shape& input) {
  ShapeCheck result;
  Shape shape = input;
  for (size_t i = 0; i < layers.size(); ++i) {
    std::string problem = apply_layer(layers[i], shape, result.parameters);
    if (!problem.empty()) {
      result.problems.emplace_back(i, std::move(problem));
      result.outputs.clear();
      return result;
    }
    result.outputs.push_back(shape);
  }
  return result;
}

}  // namespace dltune::recipes
