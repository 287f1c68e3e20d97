// GpuModel: the engine's graph executor (engine/graph/model.h) on one GPU.
//
// Built from the same graph with the GPU twin of every op (gpu_layers.h), it keeps the CPU
// Model's layout exactly: one flat device parameter buffer, one flat device gradient buffer and
// one flat device state buffer (batch-norm statistics) with every tensor at the same offset, the
// same backward plan (engine/graph/backward_plan.h: gradients of tensors read by several nodes,
// residual inputs and tied weights, are added by the later readers). So copy_params_from(const
// Model&) and the host copies are plain memcpys, checkpoints are interchangeable, and gradient
// buckets are the same slices on both.
//
// forward/backward enqueue work on the context's compute stream and return without waiting;
// a CUDA / cuBLAS / cuDNN failure while enqueueing is returned by the same call, an
// asynchronous one by the next GpuContext::synchronize().
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/gpu/gpu_context.h"
#include "engine/graph/backward_plan.h"
#include "engine/graph/model.h"
#include "engine/ops/op.h"

namespace dltune::engine::gpu {

class GpuModel {
 public:
  // Builds the model on `ctx` (which must outlive it), allocating the parameter, gradient and
  // state buffers (zeroed). Errors: the CPU Model::build's invalid_input messages for a bad
  // graph; unsupported without CUDA; internal when device memory runs out.
  static Result<std::unique_ptr<GpuModel>> build(const recipes::Graph& graph,
                                                 const std::string& name, GpuContext& ctx);

  const std::string& name() const { return name_; }
  const recipes::GraphInfo& info() const { return info_; }
  GpuContext& context() { return ctx_; }
  int num_nodes() const { return static_cast<int>(ops_.size()); }
  Op& op(int i) { return *ops_[static_cast<size_t>(i)]; }
  int64_t num_params() const { return info_.parameters; }
  float* params() { return params_.floats(); }  // device, num_params() floats
  float* grads() { return grads_.floats(); }    // device, num_params() floats
  int64_t num_state() const { return info_.state_floats; }
  float* state() { return state_.floats(); }  // device, num_state() floats (info().state order)

  // Copies the parameters and the state of a CPU model built from the same graph (synchronous).
  // Errors: invalid_input when the layouts differ (another graph).
  Status copy_params_from(const Model& model);
  // Host <-> device copies of the whole parameter, gradient or state buffer (synchronous).
  Status copy_params_from_host(const float* host);
  Status copy_params_to(float* host);
  Status copy_grads_to(float* host);
  Status copy_state_from_host(const float* host);
  Status copy_state_to(float* host);

  // Allocates activations for batches of up to max_batch samples (idempotent). Errors: device
  // memory, cuDNN algorithm selection.
  Status reserve(int max_batch);
  int max_batch() const { return max_batch_; }

  // input (B, input shape) on the device -> output (B, output shape) on the device, valid until
  // the next forward. Precondition: 0 < B <= max_batch(). `seed` drives dropout exactly as
  // Model::forward (node i gets Rng::mix(seed, i)), so CPU and GPU masks agree.
  Result<const float*> forward(const float* input, int batch, bool training, uint64_t seed = 0);
  // Backward from dout (B, output shape) on the device of the last (training) forward, writing
  // every parameter gradient, or with `accumulate` adding to it (gradient accumulation over
  // micro-batches). After node i's gradient kernels are ENQUEUED calls ready(i) (final_after(i)
  // are then final once the stream reaches there): a consumer on another stream must order
  // itself after them (GpuContext::comm_waits_for_compute), one on the host must synchronize
  // first. The model's input gets no gradient.
  Status backward(const float* input, const float* dout, int batch,
                  const std::function<void(int)>& ready = {}, bool accumulate = false);
  const std::vector<int>& final_after(int node) const {
    return plan_.final_after[static_cast<size_t>(node)];
  }

 private:
  GpuModel(GpuContext& ctx) : ctx_(ctx) {}
  void bind_all();

  std::string name_;
  GpuContext& ctx_;
  recipes::Graph graph_;
  recipes::GraphInfo info_;
  BackwardPlan plan_;
  std::vector<std::unique_ptr<Op>> ops_;
  DeviceBuffer params_, grads_, state_;
  int max_batch_ = 0;
  std::vector<DeviceBuffer> acts_;   // acts_[i]: output of node i, (B, out_shape(i))
  std::vector<DeviceBuffer> slots_;  // activation gradients (BackwardPlan::slot)
  std::vector<std::vector<const float*>> in_ptrs_;
  std::vector<std::vector<GradOut>> din_;
};

}  // namespace dltune::engine::gpu
