// Internal to recipes/model: a small helper the built-in definitions use to append nodes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "recipes/model/graph.h"

namespace dltune::recipes::internal {

class GraphBuilder {
 public:
  explicit GraphBuilder(Graph& g) : g_(g) {}

  // Appends node `name` = op(from) and returns its name.
  std::string add(const std::string& name, OpKind op, OpAttrs a, std::vector<std::string> from) {
    g_.nodes.push_back(Node{name, op, std::move(a), std::move(from)});
    return name;
  }
  std::string conv(const std::string& name, const std::string& from, int64_t out, int64_t kernel,
                   int64_t stride, int64_t pad, bool bias, const std::string& init = "") {
    OpAttrs a;
    a.out = out;
    a.kernel = kernel;
    a.stride = stride;
    a.pad = pad;
    a.bias = bias;
    a.init = init;
    return add(name, OpKind::kConv2d, a, {from});
  }
  std::string bn(const std::string& name, const std::string& from, double eps = 1e-5) {
    OpAttrs a;
    a.eps = eps;
    return add(name, OpKind::kBatchNorm, a, {from});
  }
  std::string unary(const std::string& name, OpKind op, const std::string& from) {
    return add(name, op, OpAttrs{}, {from});
  }
  std::string pool(const std::string& name, OpKind op, const std::string& from, int64_t kernel,
                   int64_t stride, int64_t pad, bool ceil_mode = false) {
    OpAttrs a;
    a.kernel = kernel;
    a.stride = stride;
    a.pad = pad;
    a.ceil_mode = ceil_mode;
    return add(name, op, a, {from});
  }
  std::string global_pool(const std::string& name, const std::string& from, int64_t h = 1,
                          int64_t w = 1) {
    OpAttrs a;
    a.out_h = h;
    a.out_w = w;
    return add(name, OpKind::kAdaptiveAvgPool, a, {from});
  }
  std::string linear(const std::string& name, const std::string& from, int64_t out,
                     bool bias = true) {
    OpAttrs a;
    a.out = out;
    a.bias = bias;
    return add(name, OpKind::kLinear, a, {from});
  }
  std::string dropout(const std::string& name, const std::string& from, double p) {
    OpAttrs a;
    a.p = p;
    return add(name, OpKind::kDropout, a, {from});
  }

 private:
  Graph& g_;
};

}  // namespace dltune::recipes::internal
