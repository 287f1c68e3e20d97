// GpuModel: the engine's sequential Model (engine/model.h) on one GPU.
//
// Built from the same ModelSpec with the GPU twin of every layer (gpu_layers.h), it keeps the
// CPU Model's layout exactly: one flat device parameter buffer and one flat device gradient
// buffer, layer i's slice starting at the same param_offset(i), weights then bias. So
// copy_params_from(const Model&) and copy_params_to(float* host) are plain memcpys, checkpoints
// are interchangeable, and gradient buckets are the same slices on both.
//
// forward/backward enqueue work on the context's compute stream and return without waiting;
// a CUDA / cuBLAS / cuDNN failure while enqueueing is returned by the same call, an
// asynchronous one by the next GpuContext::synchronize().
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "common/result.h"
#include "engine/gpu/gpu_context.h"
#include "engine/layer.h"
#include "engine/model.h"

namespace dltune::engine::gpu {

class GpuModel {
 public:
  // Builds and validates the model on `ctx` (which must outlive it), allocating the parameter
  // and gradient buffers (zeroed). Errors: the CPU Model::build's invalid_input messages for a
  // bad spec; unsupported without CUDA; internal when device memory runs out.
  static Result<std::unique_ptr<GpuModel>> build(const ModelSpec& spec, GpuContext& ctx);

  const ModelSpec& spec() const { return spec_; }
  GpuContext& context() { return ctx_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  Layer& layer(int i) { return *layers_[i]; }
  int64_t num_params() const { return num_params_; }
  // First parameter index of layer i, identical to Model::param_offset(i).
  int64_t param_offset(int i) const { return offsets_[i]; }
  float* params() { return params_.floats(); }  // device, num_params() floats
  float* grads() { return grads_.floats(); }    // device, num_params() floats

  // The same values as Model::init_params(seed) (drawn on the host by the CPU twins).
  Status init_params(uint64_t seed);
  // Copies the parameters of a CPU model built from the same spec (synchronous). Errors:
  // invalid_input when the layouts differ (another spec).
  Status copy_params_from(const Model& model);
  // Host <-> device copies of the whole parameter or gradient buffer (synchronous).
  Status copy_params_from_host(const float* host);
  Status copy_params_to(float* host);
  Status copy_grads_to(float* host);

  // Allocates activations for batches of up to max_batch samples (idempotent). Errors: device
  // memory, cuDNN algorithm selection.
  Status reserve(int max_batch);
  int max_batch() const { return max_batch_; }

  // input (B, input dims) on the device -> logits (B, classes) on the device, valid until the
  // next forward. Precondition: 0 < B <= max_batch(). `seed` drives dropout exactly as
  // Model::forward (layer i gets Rng::mix(seed, i)), so CPU and GPU masks agree.
  Result<const float*> forward(const float* input, int batch, bool training, uint64_t seed = 0);
  // Backward from dlogits (B, classes) on the device, overwriting every parameter gradient.
  // After layer i's gradient kernels are ENQUEUED (layers with parameters, last first), calls
  // ready(param_offset(i)): a consumer on another stream must order itself after them
  // (GpuContext::comm_waits_for_compute), one on the host must synchronize first.
  Status backward(const float* input, const float* dlogits, int batch,
                  const std::function<void(int64_t)>& ready = {});

 private:
  GpuModel(const ModelSpec& spec, GpuContext& ctx) : spec_(spec), ctx_(ctx) {}
  void bind_all();

  ModelSpec spec_;
  GpuContext& ctx_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int64_t> offsets_;
  int64_t num_params_ = 0;
  DeviceBuffer params_, grads_;
  int max_batch_ = 0;
  std::vector<DeviceBuffer> acts_;  // acts_[i]: output of layer i, (B, out_dims(i))
  DeviceBuffer dbuf_[2];            // ping-pong activation gradients
};

}  // namespace dltune::engine::gpu
