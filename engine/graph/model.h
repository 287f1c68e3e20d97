// The graph executor on the CPU: a model graph (recipes/model/graph.h) with one CPU op per node,
// one flat parameter buffer and one flat gradient buffer (llm.c), a flat state buffer (batch-norm
// running statistics), and activations allocated once for a maximum batch.
//
// Forward runs the nodes in list order, each writing its own output buffer (B, out_shape), which
// training keeps for backward. Backward runs them in reverse order on the static plan of
// engine/graph/backward_plan.h: activation gradients in reused slots, contributions to a tensor
// read by several nodes summed, and after each node a "ready" call with the node's index so that
// a caller can start reducing the parameter gradients that have just become final
// (final_after()). Parameter gradients are overwritten by each backward (no zeroing pass), or
// added to with accumulate (gradient accumulation over micro-batches).
//
// Parameters are laid out node by node in list order, each node's tensors in the op table's
// order (weight, then bias), with PyTorch's shapes, so gradients become final in reverse layout
// order: gradient buckets are contiguous slices of the gradient buffer.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/core/precision.h"
#include "engine/core/tensor.h"
#include "engine/core/thread_pool.h"
#include "engine/graph/backward_plan.h"
#include "engine/ops/op.h"
#include "recipes/model/graph.h"

namespace dltune::engine {

// Per node name: the kernel it runs (Op::kernels()); nodes not named run their default.
using KernelChoices = std::map<std::string, std::string>;

class Model {
 public:
  // Builds a model from a graph, named `name` (checkpoints record it). Errors (invalid_input):
  // the graph's problems, naming the node: "model 'x': node 'conv3' (conv2d): kernel 5 does not
  // fit the input 16x2x2 ...". Parameters are zero until init_params(). With `share_with`, the
  // model allocates no parameters, gradients or state of its own: it uses share_with's (as
  // share_parameters_of(), without ever touching memory for its own).
  static Result<Model> build(const recipes::Graph& graph, const std::string& name,
                             Model* share_with = nullptr);

  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;

  const std::string& name() const { return name_; }
  const recipes::Graph& graph() const { return graph_; }
  const recipes::GraphInfo& info() const { return info_; }
  const recipes::Shape& input_shape() const { return graph_.input; }
  const recipes::Shape& output_shape() const { return info_.output(); }
  int64_t input_numel() const { return recipes::numel(graph_.input); }
  int64_t output_numel() const { return recipes::numel(info_.output()); }
  int num_nodes() const { return static_cast<int>(ops_.size()); }
  Op& op(int i) { return *ops_[static_cast<size_t>(i)]; }

  int64_t num_params() const { return info_.parameters; }
  float* params() { return params_; }
  const float* params() const { return params_; }
  float* grads() {
    zero_own_grads_once();
    return grads_;
  }
  // Non-trainable state (batch-norm running statistics), info().state order.
  int64_t num_state() const { return info_.state_floats; }
  float* state() { return state_; }
  const float* state() const { return state_; }

  // Uses `grads` (num_params() floats, e.g. communicator-provided shared memory) as the gradient
  // buffer from now on instead of the model's own; nullptr returns to the model's own.
  void set_grad_buffer(float* grads);
  // Makes this model train `owner`'s parameters, gradients and state (same graph): a pipeline
  // stage keeps one model per micro-batch in flight, each with its own activations and op
  // state, all on one set of weights. Frees this model's own buffers. `owner` must outlive it.
  // Precondition: both were built from the same graph.
  void share_parameters_of(Model& owner);
  // Makes this model use `owner`'s activation-gradient slots and workspace, which only live
  // within one forward or backward call: models that run one at a time on one thread (a
  // pipeline stage's micro-batches in flight) need one set, as the memory model counts it.
  // reserve() then reserves the owner too and allocates neither. `owner` must outlive it.
  // Precondition: both were built from the same graph.
  void share_scratch_of(Model& owner);
  // Dropout seeds and parameter initialisation use node indices first_node + i: a pipeline
  // stage's sub-graph then draws what the whole model would (0 for a whole model).
  void set_first_node(int first_node) { first_node_ = first_node; }
  // Deterministic initialisation from a seed: node i draws its tensors from Rng(mix(seed, i))
  // in order, each by its ParamDef's Init (PyTorch's defaults unless the graph says he/normal);
  // state takes its init (running_var 1, the rest 0).
  void init_params(uint64_t seed);
  // The rank's threads: forward, backward and every op run on `pool` (not owned; it must
  // outlive the model; nullptr: one thread). Results do not depend on its size
  // (engine/core/parallel.h). The per-thread scratch follows at the next forward.
  void set_thread_pool(ThreadPool* pool);
  ThreadPool& pool() const { return *pool_; }
  // The compute precision of every op (engine/core/precision.h); fp32 by default. Nodes whose
  // chosen kernel does not exist in that precision go back to their default.
  void set_precision(Precision p);
  Precision precision() const { return precision_; }
  // Sets each named node's kernel. Errors (invalid_input, nothing changed): a name that is no
  // node of the model, a kernel the node does not have (the message lists its kernels).
  Status set_kernels(const KernelChoices& choices);
  // The kernels node i can run (Op::kernels()) and the one it runs.
  std::vector<std::string> kernel_candidates(int node) const {
    return ops_[static_cast<size_t>(node)]->kernels();
  }
  const std::string& kernel(int node) const { return ops_[static_cast<size_t>(node)]->kernel(); }
  // Every node's kernel by name (all nodes, defaults included).
  KernelChoices kernels() const;
  // Allocates activations and scratch for batches of up to max_batch samples (idempotent).
  void reserve(int max_batch);
  int max_batch() const { return max_batch_; }
  // Frees the activations and every op's scratch (parameters, gradients and state stay); the
  // next forward allocates them again for max_batch(). For a process that keeps several models
  // and steps one at a time (the recipe tuner's trials).
  void release();

  // input (B, input shape) -> output (B, output shape); the pointer stays valid until the next
  // forward. Precondition: 0 < B <= max_batch(). `seed` drives dropout masks (node i gets
  // Rng::mix(seed, i)). Training updates batch-norm running statistics.
  // With update_state false, training leaves the running statistics alone: a recomputed
  // forward (activation recomputation) must not count a batch twice.
  const float* forward(const float* input, int batch, bool training, uint64_t seed = 0,
                       bool update_state = true);
  // Backward from dout (B, output shape) of the last (training) forward. Writes (or, with
  // `accumulate`, adds to) every parameter gradient; after node i's backward calls ready(i)
  // (final_after(i) are then final). `dinput`, when not null, receives the gradient of the input
  // (B, input shape): a pipeline stage sends it to the stage before.
  void backward(const float* input, const float* dout, int batch,
                const std::function<void(int)>& ready = {}, bool accumulate = false,
                float* dinput = nullptr);

  // The parameter tensors (indices into info().params) final after node i's backward, and all
  // of them in the order they become final.
  const std::vector<int>& final_after(int node) const {
    return plan_.final_after[static_cast<size_t>(node)];
  }
  const std::vector<int>& final_order() const { return plan_.final_order; }
  // A parameter or state tensor by its name ("layer1.0.conv1.weight"): its floats in params()
  // or state(), or nullptr.
  float* find_tensor(const std::string& name, int64_t* count = nullptr);

  // Floating-point operations of one forward pass per sample (multiply-add = 2).
  double forward_flops_per_sample() const { return info_.flops_per_sample; }
  // Bytes reserve(max_batch) allocates for activations, their gradients, the workspace and the
  // ops' own state (what batch_buffers.h plans for one in-flight batch and planning/memory_model.h
  // counts); with share_scratch_of(), without the gradients and the workspace (the owner's).
  int64_t activation_bytes() const { return activation_bytes_; }

  // Node i's forward (then backward) alone, on the inputs the last training forward gave it and
  // a gradient `dout` of its output (B, out shape), with `workspace` of at least
  // op(i).workspace_floats(batch) floats; parameter gradients and the input gradients' slots
  // are overwritten, running statistics left alone. `twin`: run that op (Op::twin_of(op(i)))
  // instead of the node's own. For timing kernels (engine/graph/kernel_select.h).
  // Precondition: a training forward of >= batch samples ran.
  void forward_node(int i, int batch, float* workspace, Op* twin = nullptr);
  void backward_node(int i, int batch, const float* dout, float* workspace, Op* twin = nullptr);

  // Per-node timing: while on, forward and backward add each node's wall time (seconds) to
  // forward_seconds()[i] / backward_seconds()[i] (two clock reads per node per pass). For the
  // tuner's per-node costs (pipeline cuts, predictions) and for profiling.
  void set_profiling(bool on);
  const std::vector<double>& forward_seconds() const { return fwd_s_; }
  const std::vector<double>& backward_seconds() const { return bwd_s_; }

 private:
  Model() = default;
  void bind_all();
  // After a change of threads, precision or kernels: the next forward reserves again.
  void invalidate_reserve();
  // Node i's output: its own buffer, or that of the node a fused ReLU is fused into.
  const float* output_of(int i) const {
    const int f = plan_.fused_into[static_cast<size_t>(i)];
    return acts_[static_cast<size_t>(f >= 0 ? f : i)].data();
  }

  std::string name_;
  recipes::Graph graph_;
  recipes::GraphInfo info_;
  BackwardPlan plan_;
  std::vector<std::unique_ptr<Op>> ops_;
  Buffer own_params_, own_grads_, own_state_;
  // own_grads_ is allocated untouched and zeroed on first use (backward(), grads()): a trainer
  // that moves the gradients to node-shared memory (set_grad_buffer()) never faults its pages
  // in, so they cost no resident memory (the memory model counts one gradient buffer).
  bool own_grads_zeroed_ = false;
  void zero_own_grads_once();
  float* params_ = nullptr;
  float* grads_ = nullptr;
  float* state_ = nullptr;
  int first_node_ = 0;
  int max_batch_ = 0;
  bool released_ = false;
  void ensure_reserved();           // after release(): allocates again for max_batch()
  Model* scratch_owner_ = nullptr;  // share_scratch_of()
  std::vector<Buffer>& slots() { return scratch_owner_ ? scratch_owner_->slots_ : slots_; }
  float* workspace() { return (scratch_owner_ ? scratch_owner_->workspace_ : workspace_).data(); }
  int64_t activation_bytes_ = 0;
  std::vector<Buffer> acts_;   // acts_[i]: output of node i, (B, out_shape(i))
  std::vector<Buffer> slots_;  // activation gradients (BackwardPlan::slot)
  Buffer workspace_;
  bool profiling_ = false;
  ThreadPool* pool_ = &ThreadPool::serial();
  Buffer timing_input_;  // forward_node(): the model's input stand-in
  const float* timing_input(size_t node);
  Precision precision_ = Precision::kFp32;
  std::vector<double> fwd_s_, bwd_s_;
  // Per node: pointers to its inputs and gradient outputs, filled per call (no allocation).
  std::vector<std::vector<const float*>> in_ptrs_;
  std::vector<std::vector<GradOut>> din_;
};

}  // namespace dltune::engine
