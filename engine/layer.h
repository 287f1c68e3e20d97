// The Layer interface of the CPU engine.
//
// A layer is set up once for a per-sample input shape (setup), owns no parameters itself but
// is bound to slices of the model's one flat parameter buffer and one flat gradient buffer
// (llm.c), and runs forward / backward over a batch of B samples in NCHW order:
//
//   forward:  in (B, in_dims) -> out (B, out_dims)
//   backward: dout (B, out_dims) -> din (B, in_dims) [optional], dparams (overwritten)
//
// Parameter gradients are OVERWRITTEN by backward (not accumulated), so no zeroing pass is
// needed between steps. Layers that keep state between forward and backward (pooling argmax,
// dropout mask, LRN scale) size it in reserve(max_batch); forward and backward never allocate.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"
#include "engine/rng.h"
#include "engine/tensor.h"

namespace dltune::engine {

// Per-call context: scratch memory shared by all layers of a model and the training flag.
struct LayerContext {
  float* workspace = nullptr;  // at least Layer::workspace_floats(B) floats
  bool training = true;
  uint64_t seed = 0;  // per-step seed (dropout); the same seed gives the same mask
};

class Layer {
 public:
  virtual ~Layer() = default;
  // A short kind name: "linear", "conv2d", "maxpool", ...
  virtual const char* kind() const = 0;

  // Validates the layer against its per-sample input shape and returns the output shape.
  // Errors (invalid_input) say what does not fit: "conv2d: 3 input channels are not divisible
  // by groups=2". Must be called once before anything else.
  virtual Result<Dims> setup(const Dims& in) = 0;
  // Number of trainable floats (weights then bias) this layer needs in the flat buffer.
  virtual int64_t num_params() const { return 0; }
  // Binds the layer to its slices (num_params() floats each) of the flat buffers.
  void bind(float* params, float* grads) {
    params_ = params;
    grads_ = grads;
  }
  // Fills this layer's parameters (Caffe-style xavier / PyTorch-style uniform fan-in).
  virtual void init_params(Rng& /*rng*/) {}
  // Allocates per-batch state for batches of up to max_batch samples.
  virtual void reserve(int /*max_batch*/) {}
  // Frees what reserve() allocated (nothing a later step needs lives there); reserve() must
  // run again before the next forward.
  virtual void release() {}
  // Scratch floats forward/backward need for a batch of B (shared across layers).
  virtual int64_t workspace_floats(int /*batch*/) const { return 0; }

  // in (B, in_dims) -> out (B, out_dims). Precondition: B <= the reserved max batch.
  virtual void forward(const LayerContext& ctx, const float* in, float* out, int batch) = 0;
  // Computes parameter gradients (overwriting them) and, when din != nullptr, the input
  // gradient. `in` and `out` are the values forward saw and produced.
  virtual void backward(const LayerContext& ctx, const float* in, const float* out,
                        const float* dout, float* din, int batch) = 0;

  const Dims& in_dims() const { return in_; }
  const Dims& out_dims() const { return out_; }
  float* params() { return params_; }
  float* grads() { return grads_; }

 protected:
  Dims in_, out_;
  float* params_ = nullptr;
  float* grads_ = nullptr;
};

// How a layer is described: a plain value type that recipes (YAML) and the built-in models
// map onto. Unused fields are ignored by kinds that do not need them.
struct LayerSpec {
  enum class Kind { kLinear, kConv2d, kMaxPool, kAvgPool, kRelu, kDropout, kLrn, kFlatten };
  Kind kind = Kind::kLinear;
  int out = 0;          // linear: output features; conv2d: output channels
  int kernel = 1;       // conv2d / pooling: square kernel size
  int stride = 1;       // conv2d / pooling
  int pad = 0;          // conv2d / pooling: zero padding on every side
  int groups = 1;       // conv2d
  float p = 0.5f;       // dropout probability
  int lrn_size = 5;     // LRN window (channels)
  float alpha = 1e-4f;  // LRN
  float beta = 0.75f;   // LRN
  float k = 1.0f;       // LRN

  static LayerSpec linear(int out_features);
  static LayerSpec conv(int out_channels, int kernel, int stride = 1, int pad = 0, int groups = 1);
  static LayerSpec maxpool(int kernel, int stride);
  static LayerSpec avgpool(int kernel, int stride);
  static LayerSpec relu();
  static LayerSpec dropout(float p);
  static LayerSpec lrn(int size, float alpha, float beta, float k = 1.0f);
  static LayerSpec flatten();
};

// Parses a kind name ("linear", "conv2d", "maxpool", "avgpool", "relu", "dropout", "lrn",
// "flatten"); invalid_input naming the accepted names otherwise.
Result<LayerSpec::Kind> parse_layer_kind(const std::string& name);
const char* layer_kind_name(LayerSpec::Kind kind);

// Creates the layer a spec describes (not yet set up). Never fails: setup() validates.
std::unique_ptr<Layer> make_layer(const LayerSpec& spec);

}  // namespace dltune::engine
