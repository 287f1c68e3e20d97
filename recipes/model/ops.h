// The one table of op kinds: what each op of a model graph is called, which attributes it
// takes (with their ranges and defaults), how it maps input shapes to its output shape, which
// parameter and state tensors it owns (names, shapes, initialisation) and how many floating-point
// operations its forward pass costs. The recipe parser, `dltune model show`, the tuner's memory
// model and the engine's executor (engine/graph/) all read this table; the engine adds only the
// kernels (engine/ops/, engine/gpu/).
//
// Shapes are per sample (the batch dimension is implicit and outermost): (C, H, W) for images,
// (T) for token ids, (T, C) for sequences of features, (N) for flat vectors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dltune::recipes {

// A per-sample tensor shape.
using Shape = std::vector<int64_t>;

enum class OpKind {
  // The 2012 set (a `layers:` chain may use only these).
  kLinear,
  kConv2d,
  kMaxPool,
  kAvgPool,
  kRelu,
  kDropout,
  kLrn,
  kFlatten,
  // Graphs: residual networks, Inception, transformers.
  kBatchNorm,
  kAdd,
  kConcat,
  kAdaptiveAvgPool,
  kPadChannels,
  kEmbedding,
  kPositionEmbedding,
  kLayerNorm,
  kAttention,
  kGelu,
};

// The attributes of a node. Each kind reads only its own (ops.cc lists them per kind); the others
// keep these defaults, which are also the defaults a recipe gets when it leaves a key out.
struct OpAttrs {
  int64_t out = 0;         // linear: features; conv2d, pad_channels: channels; embedding: width
  int64_t kernel = 0;      // conv2d, pools: square window
  int64_t stride = 1;      // conv2d, pools (pools default to the kernel), pad_channels
  int64_t pad = 0;         // conv2d, pools: zero padding on each side
  int64_t groups = 1;      // conv2d
  bool bias = true;        // linear, conv2d: whether there is a bias
  bool flatten = false;    // linear: flatten every per-sample dimension first (a `layers:` chain)
  bool ceil_mode = false;  // pools: round the output size up (PyTorch's ceil_mode)
  bool count_include_pad = true;              // avgpool: padding counts in the divisor
  double p = 0.5;                             // dropout: probability of zeroing
  int64_t size = 5;                           // lrn: window (odd)
  double alpha = 1e-4, beta = 0.75, k = 1.0;  // lrn
  double eps = 1e-5;                          // batchnorm, layernorm
  double momentum = 0.1;                      // batchnorm: running = (1 - m) running + m batch
  int64_t out_h = 1, out_w = 1;               // adaptive_avgpool: output size
  int64_t heads = 1;                          // attention
  int64_t vocab = 0;                          // embedding: rows (token ids in [0, vocab))
  int64_t context = 0;                        // position_embedding: positions
  std::string tie;    // linear: take the weight of this parameter ("wte.weight")
  std::string init;   // linear, conv2d, embedding: "" (PyTorch default) | he | normal
  double std = 0.02;  // init normal: the weight's standard deviation
};

// How a parameter tensor starts (Model::init_params in the engine draws the values).
enum class Init {
  kUniformFanIn,  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's Linear / Conv2d default
  kHeNormal,      // N(0, sqrt(2 / fan_out)): torchvision's ResNet / VGG convolutions
  kNormal,        // N(0, std)
  kNormalOne,     // N(0, 1): PyTorch's Embedding default
  kZeros,
  kOnes,
};

// One tensor a node owns. Trainable tensors live in the model's flat parameter buffer (and get
// gradients); state tensors (batch-norm running statistics) in its state buffer.
struct ParamDef {
  std::string name;  // relative to the node: "weight", "bias", "running_mean", ...
  Shape shape;
  bool trainable = true;
  Init init = Init::kZeros;
  int64_t fan_in = 1, fan_out = 1;  // for the fan-based inits
  double std = 0.0;                 // kNormal
  bool integer = false;             // a counter (num_batches_tracked): saved as I64 in safetensors
};

// How an op's attribute is read from a recipe and printed.
struct AttrDef {
  enum class Type { kInt, kNumber, kBool, kString };
  const char* name;
  Type type;
  double min = 0, max = 0;  // inclusive range for ints and numbers
  bool required = false;
  const char* doc = "";
  bool min_open = false, max_open = false;  // numbers: strictly above min / below max
};

struct OpDef {
  OpKind kind;
  const char* name;    // "conv2d"
  int min_inputs = 1;  // add and concat take two or more
  int max_inputs = 1;  // ops of one input may appear in a `layers:` chain
  std::vector<AttrDef> attrs;
  const char* doc = "";
};

// The table, in OpKind order.
const std::vector<OpDef>& op_defs();
const OpDef& op_def(OpKind kind);
std::string_view op_name(OpKind kind);
std::optional<OpKind> parse_op_kind(std::string_view name);
// Every op's name; with chain_only, those of one input (a `layers:` list may use them).
std::vector<std::string> op_names(bool chain_only = false);

// Reads / writes the attribute `a` of `attrs` as a double (ints, bools as 0/1) or a string.
double attr_number(const OpAttrs& attrs, const AttrDef& a);
void set_attr_number(OpAttrs& attrs, const AttrDef& a, double v);
const std::string& attr_string(const OpAttrs& attrs, const AttrDef& a);
void set_attr_string(OpAttrs& attrs, const AttrDef& a, const std::string& v);
// Fills the defaults that depend on other attributes (pools' stride = kernel when the recipe
// gave no stride). `given` names the attributes the recipe set.
void apply_attr_defaults(OpKind kind, OpAttrs& attrs, const std::vector<std::string>& given);

// "conv2d(out=64, kernel=7, stride=2, pad=3, bias=false)": the kind and every attribute of it
// that differs from its default (all of them with `all`); for signatures, tables and messages.
std::string describe_op(OpKind kind, const OpAttrs& attrs, bool all = false);
// "3x32x32"; "scalar" for an empty shape.
std::string describe_shape(const Shape& shape);
// Elements of a shape (1 for a scalar). Saturates at INT64_MAX instead of overflowing.
int64_t numel(const Shape& shape);

// The output shape of `kind` on inputs `in`, or a message saying what does not fit
// ("kernel 5 does not fit the input 16x2x2 with pad 0; ...").
struct InferResult {
  Shape out;
  std::string problem;  // "" when out is valid
};
InferResult infer_shape(OpKind kind, const OpAttrs& attrs, const std::vector<Shape>& in);
// The tensors a node of `kind` owns for inputs `in` (call after infer_shape succeeded), in their
// order in the flat buffers. A linear with `tie` lists no weight (it uses the tied tensor).
std::vector<ParamDef> op_params(OpKind kind, const OpAttrs& attrs, const std::vector<Shape>& in);
// Floating-point operations of one forward pass for one sample (a multiply-add counts 2).
double op_flops(OpKind kind, const OpAttrs& attrs, const std::vector<Shape>& in, const Shape& out);

}  // namespace dltune::recipes
