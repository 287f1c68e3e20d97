// Layer specs and shapes (Dims::str): the description of a layer (kind and hyper-parameters) that
// recipes, plans and train configs carry. Kept apart from the layers themselves (layers.cc) so that
// a program that only reads and writes configurations (the dltune launcher) does not link the
// compute kernels and OpenBLAS, whose loading and thread start-up cost every launch ~5 ms.
#include <string>

#include "engine/layer.h"
#include "engine/tensor.h"

namespace dltune::engine {

std::string Dims::str() const {
  if (h == 1 && w == 1) return "(" + std::to_string(c) + ")";
  return "(" + std::to_string(c) + ", " + std::to_string(h) + ", " + std::to_string(w) + ")";
}

LayerSpec LayerSpec::linear(int out_features) {
  LayerSpec s;
  s.kind = Kind::kLinear;
  s.out = out_features;
  return s;
}
LayerSpec LayerSpec::conv(int out_channels, int kernel, int stride, int pad, int groups) {
  LayerSpec s;
  s.kind = Kind::kConv2d;
  s.out = out_channels;
  s.kernel = kernel;
  s.stride = stride;
  s.pad = pad;
  s.groups = groups;
  return s;
}
LayerSpec LayerSpec::maxpool(int kernel, int stride) {
  LayerSpec s;
  s.kind = Kind::kMaxPool;
  s.kernel = kernel;
  s.stride = stride;
  return s;
}
LayerSpec LayerSpec::avgpool(int kernel, int stride) {
  LayerSpec s = maxpool(kernel, stride);
  s.kind = Kind::kAvgPool;
  return s;
}
LayerSpec LayerSpec::relu() {
  LayerSpec s;
  s.kind = Kind::kRelu;
  return s;
}
LayerSpec LayerSpec::dropout(float p) {
  LayerSpec s;
  s.kind = Kind::kDropout;
  s.p = p;
  return s;
}
LayerSpec LayerSpec::lrn(int size, float alpha, float beta, float k) {
  LayerSpec s;
  s.kind = Kind::kLrn;
  s.lrn_size = size;
  s.alpha = alpha;
  s.beta = beta;
  s.k = k;
  return s;
}
LayerSpec LayerSpec::flatten() {
  LayerSpec s;
  s.kind = Kind::kFlatten;
  return s;
}

namespace {
constexpr struct {
  const char* name;
  LayerSpec::Kind kind;
} kKindNames[] = {
    {"linear", LayerSpec::Kind::kLinear},   {"conv2d", LayerSpec::Kind::kConv2d},
    {"maxpool", LayerSpec::Kind::kMaxPool}, {"avgpool", LayerSpec::Kind::kAvgPool},
    {"relu", LayerSpec::Kind::kRelu},       {"dropout", LayerSpec::Kind::kDropout},
    {"lrn", LayerSpec::Kind::kLrn},         {"flatten", LayerSpec::Kind::kFlatten},
};
}  // namespace

Result<LayerSpec::Kind> parse_layer_kind(const std::string& name) {
  for (const auto& k : kKindNames)
    if (name == k.name) return k.kind;
  return invalid_input("unknown layer kind '" + name +
                       "'; expected one of linear, conv2d, maxpool, avgpool, relu, dropout, "
                       "lrn, flatten");
}

const char* layer_kind_name(LayerSpec::Kind kind) {
  for (const auto& k : kKindNames)
    if (kind == k.kind) return k.name;
  return "?";
}

}  // namespace dltune::engine
