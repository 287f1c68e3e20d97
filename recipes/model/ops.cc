#include "recipes/model/ops.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace dltune::recipes {
namespace {

using T = AttrDef::Type;
constexpr double kBig = 2147483647.0;  // sizes fit an int: the kernels index with int

AttrDef size_attr(const char* name, bool required, const char* doc, double min = 1) {
  return {name, T::kInt, min, kBig, required, doc};
}
const AttrDef kBias{"bias", T::kBool, 0, 1, false, "whether the op adds a bias (true)"};
const AttrDef kInit{"init", T::kString, 0,
                    0,      false,      "weight initialisation: default (PyTorch's), he, normal"};
const AttrDef kStd{"std", T::kNumber, 0, 10, false, "init normal: standard deviation (0.02)", true};
const AttrDef kCeil{"ceil_mode", T::kBool, 0, 1, false, "round the output size up (false)"};

// The CNNs' layers with weights and their pooling: linear, conv2d, maxpool, avgpool.
void add_cnn_layers(std::vector<OpDef>& t) {
  t.push_back({OpKind::kLinear,
               "linear",
               1,
               1,
               {size_attr("out", true, "output features"),
                kBias,
                {"flatten", T::kBool, 0, 1, false, "flatten the input first (true in layers:)"},
                {"tie", T::kString, 0, 0, false, "use this parameter as the weight"},
                kInit,
                kStd},
               "y = x W^T + b over the last dimension"});
  t.push_back({OpKind::kConv2d,
               "conv2d",
               1,
               1,
               {size_attr("out", true, "output channels"), size_attr("kernel", true, "window"),
                size_attr("stride", false, "step (1)"), size_attr("pad", false, "padding (0)", 0),
                size_attr("groups", false, "grouped convolution (1)"), kBias, kInit, kStd},
               "2-D convolution, square kernel"});
  t.push_back({OpKind::kMaxPool,
               "maxpool",
               1,
               1,
               {size_attr("kernel", true, "window"), size_attr("stride", false, "step (= kernel)"),
                size_attr("pad", false, "padding (0, at most kernel/2)", 0), kCeil},
               "max pooling"});
  t.push_back({OpKind::kAvgPool,
               "avgpool",
               1,
               1,
               {size_attr("kernel", true, "window"),
                size_attr("stride", false, "step (= kernel)"),
                size_attr("pad", false, "padding (0, at most kernel/2)", 0),
                kCeil,
                {"count_include_pad", T::kBool, 0, 1, false, "padding counts in the mean (true)"}},
               "average pooling"});
}

// The CNNs' parameter-light layers: activation, dropout, normalisations, flatten.
void add_cnn_pointwise(std::vector<OpDef>& t) {
  t.push_back({OpKind::kRelu, "relu", 1, 1, {}, "max(0, x)"});
  t.push_back({OpKind::kDropout,
               "dropout",
               1,
               1,
               {{"p", T::kNumber, 0, 1, false, "probability of zeroing (0.5)", false, true}},
               "inverted dropout while training"});
  t.push_back({OpKind::kLrn,
               "lrn",
               1,
               1,
               {size_attr("size", false, "window in channels, odd (5)"),
                {"alpha", T::kNumber, 0, 1e30, false, "(1e-4)", true},
                {"beta", T::kNumber, 0, 1e30, false, "(0.75)", true},
                {"k", T::kNumber, 0, 1e30, false, "(1)", true}},
               "local response normalisation across channels"});
  t.push_back({OpKind::kFlatten, "flatten", 1, 1, {}, "every per-sample dimension into one"});
  t.push_back({OpKind::kBatchNorm,
               "batchnorm",
               1,
               1,
               {{"eps", T::kNumber, 0, 1, false, "(1e-5)", true},
                {"momentum", T::kNumber, 0, 1, false, "running statistics update (0.1)"}},
               "batch normalisation over the first per-sample dimension (channels)"});
}

// What residual and densely connected networks add: joins of several inputs, pooling to a
// fixed size, the parameter-free shortcut.
void add_join_ops(std::vector<OpDef>& t) {
  t.push_back({OpKind::kAdd, "add", 2, 64, {}, "element-wise sum of inputs of one shape"});
  t.push_back({OpKind::kConcat,
               "concat",
               2,
               64,
               {},
               "inputs joined along the first per-sample dimension (channels)"});
  t.push_back({OpKind::kAdaptiveAvgPool,
               "adaptive_avgpool",
               1,
               1,
               {size_attr("out_h", false, "output height (1)"),
                size_attr("out_w", false, "output width (1)")},
               "average pooling to a fixed output size (1x1: global)"});
  t.push_back({OpKind::kPadChannels,
               "pad_channels",
               1,
               1,
               {size_attr("out", true, "output channels (>= input, same parity)"),
                size_attr("stride", false, "spatial subsampling (1)")},
               "parameter-free shortcut: subsample, zero-pad channels on both sides"});
}

// The transformers' ops: embeddings, layer normalisation, attention, GELU.
void add_transformer_ops(std::vector<OpDef>& t) {
  t.push_back({OpKind::kEmbedding,
               "embedding",
               1,
               1,
               {size_attr("vocab", true, "token ids in [0, vocab)"),
                size_attr("out", true, "width"), kInit, kStd},
               "token ids (T) -> rows of a table (T, out)"});
  t.push_back({OpKind::kPositionEmbedding,
               "position_embedding",
               1,
               1,
               {size_attr("context", true, "positions"), kInit, kStd},
               "(T, C) + a learned row per position"});
  t.push_back({OpKind::kLayerNorm,
               "layernorm",
               1,
               1,
               {{"eps", T::kNumber, 0, 1, false, "(1e-5)", true}},
               "normalisation over the last dimension"});
  t.push_back({OpKind::kAttention,
               "attention",
               1,
               1,
               {size_attr("heads", true, "attention heads (divide the width)")},
               "causal multi-head self-attention: (T, 3C) of q, k, v -> (T, C)"});
  t.push_back({OpKind::kGelu, "gelu", 1, 1, {}, "GELU, tanh approximation (GPT-2)"});
}

// Every op's definition, by family (the table's order).
std::vector<OpDef> make_table() {
  std::vector<OpDef> t;
  add_cnn_layers(t);
  add_cnn_pointwise(t);
  add_join_ops(t);
  add_transformer_ops(t);
  return t;
}

int64_t* int_field(OpAttrs& a, std::string_view n) {
  if (n == "out") return &a.out;
  if (n == "kernel") return &a.kernel;
  if (n == "stride") return &a.stride;
  if (n == "pad") return &a.pad;
  if (n == "groups") return &a.groups;
  if (n == "size") return &a.size;
  if (n == "out_h") return &a.out_h;
  if (n == "out_w") return &a.out_w;
  if (n == "heads") return &a.heads;
  if (n == "vocab") return &a.vocab;
  if (n == "context") return &a.context;
  return nullptr;
}
double* number_field(OpAttrs& a, std::string_view n) {
  if (n == "p") return &a.p;
  if (n == "alpha") return &a.alpha;
  if (n == "beta") return &a.beta;
  if (n == "k") return &a.k;
  if (n == "eps") return &a.eps;
  if (n == "momentum") return &a.momentum;
  if (n == "std") return &a.std;
  return nullptr;
}
bool* bool_field(OpAttrs& a, std::string_view n) {
  if (n == "bias") return &a.bias;
  if (n == "flatten") return &a.flatten;
  if (n == "ceil_mode") return &a.ceil_mode;
  if (n == "count_include_pad") return &a.count_include_pad;
  return nullptr;
}
std::string* string_field(OpAttrs& a, std::string_view n) {
  if (n == "tie") return &a.tie;
  if (n == "init") return &a.init;
  return nullptr;
}

std::string num_str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
std::string str(int64_t v) { return std::to_string(v); }

int64_t sat_mul(int64_t a, int64_t b) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a)
    return std::numeric_limits<int64_t>::max();
  return a * b;
}

// Output size of a window op along one dimension (PyTorch's pooling_output_shape); <= 0 when
// the window does not fit.
int64_t window_out(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  const int64_t span = in + 2 * pad - kernel;
  if (span < 0) return 0;
  int64_t out = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

InferResult fail(std::string m) { return {{}, std::move(m)}; }

InferResult infer_window(OpKind kind, const OpAttrs& a, const Shape& x) {
  const std::string name(op_name(kind));
  if (x.size() != 3)
    return fail(name + " needs a (C,H,W) input, got " + (x.size() == 1 ? "the flat vector " : "") +
                describe_shape(x) +
                "; put convolution and pooling layers before linear and flatten");
  const int64_t h = window_out(x[1], a.kernel, a.stride, a.pad, a.ceil_mode);
  const int64_t w = window_out(x[2], a.kernel, a.stride, a.pad, a.ceil_mode);
  if (h <= 0 || w <= 0)
    return fail(name + " kernel " + str(a.kernel) + " does not fit the input " + describe_shape(x) +
                " with pad " + str(a.pad) +
                "; use a smaller kernel, more padding or fewer pooling layers before it");
  if (kind != OpKind::kConv2d) return {{x[0], h, w}, ""};
  if (x[0] % a.groups != 0 || a.out % a.groups != 0)
    return fail("conv2d groups " + str(a.groups) + " must divide both the input channels " +
                str(x[0]) + " and out " + str(a.out));
  return {{a.out, h, w}, ""};
}

}  // namespace

const std::vector<OpDef>& op_defs() {
  static const std::vector<OpDef> table = make_table();
  return table;
}

const OpDef& op_def(OpKind kind) { return op_defs()[static_cast<size_t>(kind)]; }

std::string_view op_name(OpKind kind) { return op_def(kind).name; }

std::optional<OpKind> parse_op_kind(std::string_view name) {
  for (const OpDef& d : op_defs())
    if (name == d.name) return d.kind;
  return std::nullopt;
}

std::vector<std::string> op_names(bool chain_only) {
  std::vector<std::string> out;
  for (const OpDef& d : op_defs())
    if (!chain_only || d.max_inputs == 1) out.emplace_back(d.name);
  return out;
}

double attr_number(const OpAttrs& attrs, const AttrDef& a) {
  auto& m = const_cast<OpAttrs&>(attrs);  // the field lookups do not write
  if (int64_t* i = int_field(m, a.name)) return static_cast<double>(*i);
  if (double* d = number_field(m, a.name)) return *d;
  if (bool* b = bool_field(m, a.name)) return *b ? 1.0 : 0.0;
  return 0.0;
}

void set_attr_number(OpAttrs& attrs, const AttrDef& a, double v) {
  if (int64_t* i = int_field(attrs, a.name)) *i = static_cast<int64_t>(v);
  if (double* d = number_field(attrs, a.name)) *d = v;
  if (bool* b = bool_field(attrs, a.name)) *b = v != 0.0;
}

const std::string& attr_string(const OpAttrs& attrs, const AttrDef& a) {
  static const std::string empty;
  const std::string* s = string_field(const_cast<OpAttrs&>(attrs), a.name);
  return s ? *s : empty;
}

void set_attr_string(OpAttrs& attrs, const AttrDef& a, const std::string& v) {
  if (std::string* s = string_field(attrs, a.name)) *s = v;
}

void apply_attr_defaults(OpKind kind, OpAttrs& attrs, const std::vector<std::string>& given) {
  const bool pool = kind == OpKind::kMaxPool || kind == OpKind::kAvgPool;
  bool has_stride = false;
  for (const auto& g : given) has_stride = has_stride || g == "stride";
  if (pool && !has_stride) attrs.stride = attrs.kernel;
}

std::string describe_op(OpKind kind, const OpAttrs& attrs, bool all) {
  const OpDef& d = op_def(kind);
  OpAttrs defaults;
  apply_attr_defaults(kind, defaults, {});
  std::string out(d.name), args;
  for (const AttrDef& a : d.attrs) {
    std::string v;
    if (a.type == T::kString) {
      const std::string& s = attr_string(attrs, a);
      if (s.empty() || (!all && s == attr_string(defaults, a))) continue;
      v = s;
    } else {
      const double x = attr_number(attrs, a);
      // A pool's stride defaults to its kernel: it is a difference only when it is not that.
      const bool dflt = std::string_view(a.name) == "stride" &&
                                (kind == OpKind::kMaxPool || kind == OpKind::kAvgPool)
                            ? attrs.stride == attrs.kernel
                            : x == attr_number(defaults, a);
      if (!all && dflt && !a.required) continue;
      if (a.type == T::kBool)
        v = x != 0.0 ? "true" : "false";
      else if (a.type == T::kInt)
        v = str(static_cast<int64_t>(x));
      else
        v = num_str(x);
    }
    args += (args.empty() ? "" : ", ") + std::string(a.name) + "=" + v;
  }
  return args.empty() ? out : out + "(" + args + ")";
}

std::string describe_shape(const Shape& shape) {
  if (shape.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) out += (i > 0 ? "x" : "") + str(shape[i]);
  return out;
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n = sat_mul(n, d);
  return n;
}

InferResult infer_shape(OpKind kind, const OpAttrs& a, const std::vector<Shape>& in) {
  const OpDef& d = op_def(kind);
  const std::string name(d.name);
  if (static_cast<int>(in.size()) < d.min_inputs || static_cast<int>(in.size()) > d.max_inputs)
    return fail(name + " takes " +
                (d.min_inputs == d.max_inputs ? str(d.min_inputs)
                                              : str(d.min_inputs) + " to " + str(d.max_inputs)) +
                " inputs, got " + str(static_cast<int64_t>(in.size())));
  const Shape& x = in[0];
  switch (kind) {
    case OpKind::kLinear:
      if (a.flatten) return {{a.out}, ""};
      if (x.empty()) return fail("linear needs an input with a feature dimension, got a scalar");
      {
        Shape out = x;
        out.back() = a.out;
        return {out, ""};
      }
    case OpKind::kConv2d:
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return infer_window(kind, a, x);
    case OpKind::kRelu:
    case OpKind::kDropout:
    case OpKind::kGelu:
      return {x, ""};
    case OpKind::kLrn:
      if (x.size() != 3) return fail("lrn needs a (C,H,W) input, got " + describe_shape(x));
      return {x, ""};
    case OpKind::kFlatten:
      return {{numel(x)}, ""};
    case OpKind::kBatchNorm:
      if (x.empty()) return fail("batchnorm needs a (C, ...) input, got a scalar");
      return {x, ""};
    case OpKind::kLayerNorm:
      if (x.empty()) return fail("layernorm needs an input with a feature dimension");
      return {x, ""};
    case OpKind::kAdd:
      for (size_t i = 1; i < in.size(); ++i)
        if (in[i] != x)
          return fail("add needs inputs of one shape, got " + describe_shape(x) + " and " +
                      describe_shape(in[i]));
      return {x, ""};
    case OpKind::kConcat: {
      if (x.empty()) return fail("concat needs inputs with a channel dimension");
      Shape out = x;
      for (size_t i = 1; i < in.size(); ++i) {
        const bool same_rest =
            in[i].size() == x.size() && std::equal(x.begin() + 1, x.end(), in[i].begin() + 1);
        if (!same_rest)
          return fail("concat needs inputs that differ only in channels, got " + describe_shape(x) +
                      " and " + describe_shape(in[i]));
        out[0] += in[i][0];
      }
      return {out, ""};
    }
    case OpKind::kAdaptiveAvgPool:
      if (x.size() != 3)
        return fail("adaptive_avgpool needs a (C,H,W) input, got " + describe_shape(x));
      return {{x[0], a.out_h, a.out_w}, ""};
    case OpKind::kPadChannels:
      if (x.size() != 3)
        return fail("pad_channels needs a (C,H,W) input, got " + describe_shape(x));
      if (a.out < x[0] || (a.out - x[0]) % 2 != 0)
        return fail("pad_channels out " + str(a.out) + " must be at least the input channels " +
                    str(x[0]) + " and differ from them by an even number");
      return {{a.out, (x[1] + a.stride - 1) / a.stride, (x[2] + a.stride - 1) / a.stride}, ""};
    case OpKind::kEmbedding:
      if (x.size() != 1)
        return fail("embedding needs token ids (T), got " + describe_shape(x) +
                    "; it must read the model's input of a text dataset");
      return {{x[0], a.out}, ""};
    case OpKind::kPositionEmbedding:
      if (x.size() != 2)
        return fail("position_embedding needs a (T, C) input, got " + describe_shape(x));
      if (x[0] > a.context)
        return fail("position_embedding has " + str(a.context) +
                    " positions but the sequence has " + str(x[0]) + "; raise the model's context");
      return {x, ""};
    case OpKind::kAttention:
      if (x.size() != 2 || x[1] % 3 != 0)
        return fail("attention needs (T, 3C) of queries, keys and values, got " +
                    describe_shape(x));
      if ((x[1] / 3) % a.heads != 0)
        return fail("attention heads " + str(a.heads) + " must divide the width " + str(x[1] / 3));
      return {{x[0], x[1] / 3}, ""};
  }
  return fail("unknown op");
}

std::vector<ParamDef> op_params(OpKind kind, const OpAttrs& a, const std::vector<Shape>& in) {
  std::vector<ParamDef> p;
  const Shape& x = in[0];
  // The weight's initialisation from the `init` attribute.
  auto weight = [&](Shape shape, int64_t fan_in, int64_t fan_out, Init dflt) {
    ParamDef w{"weight", std::move(shape), true, dflt, fan_in, fan_out, a.std};
    if (a.init == "he") w.init = Init::kHeNormal;
    if (a.init == "normal") w.init = Init::kNormal;
    return w;
  };
  // PyTorch draws the bias like the weight's default; with an explicit init it starts at zero.
  auto bias = [&](int64_t n, int64_t fan_in) {
    return ParamDef{"bias", {n}, true, a.init.empty() ? Init::kUniformFanIn : Init::kZeros, fan_in};
  };
  switch (kind) {
    case OpKind::kLinear: {
      const int64_t f = a.flatten ? numel(x) : x.back();
      if (a.tie.empty()) p.push_back(weight({a.out, f}, f, a.out, Init::kUniformFanIn));
      if (a.bias) p.push_back(bias(a.out, f));
      break;
    }
    case OpKind::kConv2d: {
      const int64_t rf = a.kernel * a.kernel;
      const int64_t fan_in = x[0] / a.groups * rf;
      p.push_back(weight({a.out, x[0] / a.groups, a.kernel, a.kernel}, fan_in, a.out * rf,
                         Init::kUniformFanIn));
      if (a.bias) p.push_back(bias(a.out, fan_in));
      break;
    }
    case OpKind::kBatchNorm:
    case OpKind::kLayerNorm: {
      const int64_t c = kind == OpKind::kBatchNorm ? x[0] : x.back();
      p.push_back({"weight", {c}, true, Init::kOnes});
      p.push_back({"bias", {c}, true, Init::kZeros});
      if (kind == OpKind::kBatchNorm) {
        p.push_back({"running_mean", {c}, false, Init::kZeros});
        p.push_back({"running_var", {c}, false, Init::kOnes});
        p.push_back({"num_batches_tracked", {}, false, Init::kZeros, 1, 1, 0, true});
      }
      break;
    }
    case OpKind::kEmbedding:
      p.push_back(weight({a.vocab, a.out}, a.out, a.vocab, Init::kNormalOne));
      break;
    case OpKind::kPositionEmbedding:
      p.push_back(weight({a.context, x[1]}, x[1], a.context, Init::kNormalOne));
      break;
    default:
      break;
  }
  return p;
}

double op_flops(OpKind kind, const OpAttrs& a, const std::vector<Shape>& in, const Shape& out) {
  const Shape& x = in[0];
  const double n_out = static_cast<double>(numel(out));
  switch (kind) {
    case OpKind::kLinear: {
      const double f = static_cast<double>(a.flatten ? numel(x) : x.back());
      return 2.0 * f * n_out;
    }
    case OpKind::kConv2d:
      return 2.0 * static_cast<double>(x[0] / a.groups * a.kernel * a.kernel) * n_out;
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return static_cast<double>(a.kernel * a.kernel) * n_out;
    case OpKind::kLrn:
      return static_cast<double>(a.size + 4) * n_out;
    case OpKind::kBatchNorm:
    case OpKind::kLayerNorm:
      return 4.0 * n_out;
    case OpKind::kAdd:
    case OpKind::kConcat:
      return static_cast<double>(in.size() - 1) * n_out;
    case OpKind::kAttention: {
      // Scores q k^T and the weighted sum of v over the causal triangle, plus the softmax.
      const double t = static_cast<double>(x[0]), c = static_cast<double>(out[1]);
      return 2.0 * t * (t + 1) * c + 3.0 * t * (t + 1) / 2 * static_cast<double>(a.heads);
    }
    case OpKind::kGelu:
      return 8.0 * n_out;
    default:
      return n_out;
  }
}

}  // namespace dltune::recipes
