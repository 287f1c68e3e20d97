// A sequential model: layers built from a LayerSpec list, one flat parameter buffer and one flat
// gradient buffer (llm.c), activations allocated once for a maximum batch.
//
// Parameters are laid out in forward layer order (each layer: weights then bias), so the
// gradients that become final during backward (last layer first) always form the contiguous
// tail [param_offset(i), num_params()) of the gradient buffer: gradient buckets in reverse
// layer order are plain slices of it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/layer.h"
#include "engine/tensor.h"

namespace dltune::engine {

// What a model is: a name, the per-sample input shape, the number of classes and the layers.
// The last layer's output must have exactly `classes` values per sample (the logits).
struct ModelSpec {
  std::string name;
  Dims input;
  int classes = 0;
  std::vector<LayerSpec> layers;
};

class Model {
 public:
  // Builds and validates a model. Errors (invalid_input) name the layer:
  // "model 'x': layer 3 (conv2d): kernel 5 does not fit input (16, 2, 2)". Parameters are
  // zero until init_params().
  static Result<Model> build(const ModelSpec& spec);

  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;

  const ModelSpec& spec() const { return spec_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  Layer& layer(int i) { return *layers_[i]; }
  int64_t num_params() const { return num_params_; }
  // First parameter index of layer i (== num_params() for the layers after the last one with
  // parameters).
  int64_t param_offset(int i) const { return offsets_[i]; }
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_; }

  // Uses `grads` (num_params() floats, e.g. communicator-provided shared memory) as the gradient
  // buffer from now on instead of the model's own.
  void set_grad_buffer(float* grads);
  // Deterministic initialisation from a seed (PyTorch-style fan-in uniform).
  void init_params(uint64_t seed);
  // Allocates activations and scratch for batches of up to max_batch samples (idempotent).
  void reserve(int max_batch);
  int max_batch() const { return max_batch_; }
  // Frees the activations and every layer's scratch (parameters and gradients stay); the next
  // forward allocates them again for max_batch(). For a process that keeps several models and
  // steps one at a time (the recipe tuner's trials): with freed memory kept in the heap
  // (comm::keep_freed_memory()), each model's scratch reuses pages already faulted in instead
  // of faulting in its own.
  void release();

  // input (B, input dims) -> logits (B, classes); the pointer stays valid until the next
  // forward. Precondition: 0 < B <= max_batch(). `seed` drives dropout masks.
  const float* forward(const float* input, int batch, bool training, uint64_t seed = 0);
  // Backward from dlogits (B, classes) of the last forward. Overwrites every parameter
  // gradient. After layer i's gradients are final, calls ready(param_offset(i)) (layers with
  // parameters only, last layer first), so a caller can start reducing that tail early.
  void backward(const float* input, const float* dlogits, int batch,
                const std::function<void(int64_t)>& ready = {});

  // Floating-point operations of one forward pass per sample (multiply-add = 2), for GFLOP/s.
  double forward_flops_per_sample() const;

 private:
  Model() = default;
  void bind_all();

  ModelSpec spec_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int64_t> offsets_;
  int64_t num_params_ = 0;
  Buffer params_, own_grads_;
  float* grads_ = nullptr;
  int max_batch_ = 0;
  bool released_ = false;
  std::vector<Buffer> acts_;  // acts_[i]: output of layer i, (B, out_dims(i))
  Buffer dbuf_[2];            // ping-pong activation gradients
  Buffer workspace_;
};

}  // namespace dltune::engine
