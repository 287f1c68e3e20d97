// The model part of a recipe: layer specifications, the built-in architectures, and shape
// inference over a layer list (output shapes, parameter counts, impossible layer chains).
//
// Shapes are per sample, channels first: (C, H, W) for images, (N) for flat vectors. Pooling and
// convolution output sizes round down: out = (in + 2*pad - kernel) / stride + 1.
// The loss is always softmax cross-entropy over the last layer's outputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dltune::recipes {

enum class LayerKind { kLinear, kConv2d, kMaxPool, kAvgPool, kRelu, kDropout, kLrn, kFlatten };

// One layer. Only the fields of its kind are meaningful; the others keep their defaults.
struct LayerSpec {
  LayerKind kind = LayerKind::kRelu;
  int64_t out = 0;     // linear: output features; conv2d: output channels
  int64_t kernel = 0;  // conv2d, pools: square kernel size
  int64_t stride = 1;  // conv2d, pools (pools default to stride = kernel when not given)
  int64_t pad = 0;     // conv2d, pools: zero padding on each side
  int64_t groups = 1;  // conv2d: grouped convolution (AlexNet uses 2)
  double p = 0.5;      // dropout: probability of zeroing an activation, in [0, 1)
  int64_t size = 5;    // lrn: channels in the normalisation window (odd)
  double alpha = 1e-4, beta = 0.75, k = 1.0;  // lrn: x / (k + alpha/size * sum x^2)^beta
};

// A per-sample tensor shape: {C, H, W} for images, {N} for flat vectors.
using Shape = std::vector<int64_t>;

std::string_view layer_kind_name(LayerKind kind);  // "linear", "conv2d", "maxpool", ...
std::optional<LayerKind> parse_layer_kind(std::string_view s);
std::vector<std::string> layer_kind_names();
// "conv2d(out=20, kernel=5, stride=1, pad=0, groups=1)": every field of the kind, for
// signatures and messages.
std::string describe_layer(const LayerSpec& layer);
// "1x28x28".
std::string describe_shape(const Shape& shape);

// The built-in architectures. `classes` sets the last layer's width. mlp: 784-512-256-classes
// (flattened input); lenet: Caffe's MNIST LeNet (431,080 parameters for 10 classes);
// lenet5: LeCun's LeNet-5 (avgpool, 6-16-120-84); alexnet: Caffe's bvlc_alexnet with grouped
// convolutions and LRN (60,965,224 parameters for 1000 classes on 3x227x227);
// cifar-cnn: Caffe's cifar10_quick (conv 32-32-64, 5x5, pad 2).
std::vector<std::string> builtin_model_names();
// The layer list of a built-in model; nullopt when `name` is not one of builtin_model_names().
std::optional<std::vector<LayerSpec>> builtin_model(std::string_view name, int64_t classes);

// The result of running shapes through a layer list.
struct ShapeCheck {
  std::vector<Shape> outputs;  // outputs[i]: shape after layer i (only when problems is empty)
  int64_t parameters = 0;      // weights + biases of every layer
  // One entry per impossible layer: {layer index, message}. The message names what is wrong
  // and what would work ("kernel 5 is larger than the padded input 3x3; ...").
  std::vector<std::pair<size_t, std::string>> problems;
};
// Propagates `input` through `layers`. Linear layers flatten their input implicitly; conv and
// pooling layers need a (C,H,W) input. Never fails as a call: problems are in the result, and
// propagation stops at the first impossible layer.
ShapeCheck check_shapes(const std::vector<LayerSpec>& layers, const Shape& input);

}  // namespace dltune::recipes
