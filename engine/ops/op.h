// The kernel interface of the graph engine: one Op object per node of a model graph
// (recipes/model/graph.h). The op table (recipes/model/ops.h) defines what an op computes, its
// attributes, shapes and parameters; an Op here is the code that computes it, on the CPU
// (engine/ops/*) or, with the same interface on device pointers, on the GPU (engine/gpu/).
//
// Tensors are plain float arrays with the batch outermost, the rest in the per-sample shape's
// row-major order (NCHW for images, N T C for sequences):
//
//   forward:  in[k] (B, in_shape(k)) ... -> out (B, out_shape)
//   backward: dout (B, out_shape) -> din[k] (B, in_shape(k)) where requested, and the gradients
//             of the node's parameter tensors.
//
// Gradients into a tensor read by several nodes (a residual's input, a tied weight) are summed:
// the first node in backward order writes, later ones add. So every gradient output says
// whether it is written or added to (GradOut::accumulate for inputs, accumulate_grad(t) for
// parameter tensors). Ops keep what backward needs from forward (pooling argmax, dropout mask,
// normalisation statistics) in their own buffers sized by reserve(max_batch); forward and
// backward never allocate.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/core/precision.h"
#include "engine/core/thread_pool.h"
#include "engine/ops/op_memory.h"
#include "recipes/model/graph.h"

namespace dltune::engine {

using recipes::Shape;

// Per-call context.
struct OpContext {
  float* workspace = nullptr;  // scratch shared by all ops: at least workspace_floats(B) floats
  bool training = true;
  uint64_t seed = 0;  // per node and step: the same seed gives the same dropout mask
  // Add every parameter gradient to what is there (gradient accumulation over micro-batches)
  // instead of writing the first contribution.
  bool accumulate_param_grads = false;
  // Training forwards update running statistics (batch norm) unless this is false: a forward
  // recomputed for the backward must not count its batch twice.
  bool update_state = true;
  // The rank's threads (engine/core/thread_pool.h): every op runs its loops on them, with
  // results that do not depend on their number (engine/core/parallel.h). Never null.
  ThreadPool* pool = &ThreadPool::serial();
};

// Where backward puts the gradient of one input.
struct GradOut {
  float* data = nullptr;    // nullptr: the gradient of this input is not needed
  bool accumulate = false;  // add to data (another reader wrote it first) instead of writing
};

class Op {
 public:
  virtual ~Op() = default;
  // A short kind name: the op table's ("conv2d").
  const char* kind() const { return recipes::op_def(node_.op).name; }
  const recipes::Node& node() const { return node_; }
  const std::vector<Shape>& in_shapes() const { return in_; }
  const Shape& out_shape() const { return out_; }

  // Prepares the op for its per-sample input and output shapes (already checked by the op
  // table's shape rule). Called once, before anything else. Errors: invalid_input when a kernel
  // cannot handle a shape the table allows (it says which).
  Status setup(const recipes::Node& node, const std::vector<Shape>& in, const Shape& out) {
    node_ = node;
    in_ = in;
    out_ = out;
    DLTUNE_TRY(configure());
    kernel_ = kernels().front();
    use_kernel(kernel_);
    return ok_status();
  }
  // Binds the node's tensors (recipes::GraphInfo::node_params / node_state order): parameters,
  // their gradients (accumulate[t]: add rather than write: a tensor some other node's backward
  // writes first), and non-trainable state.
  void bind(std::vector<float*> params, std::vector<float*> grads, std::vector<bool> accumulate,
            std::vector<float*> state) {
    params_ = std::move(params);
    grads_ = std::move(grads);
    grad_accumulate_ = std::move(accumulate);
    state_ = std::move(state);
  }
  // The number of threads forward/backward will run on (their pool's size): ops with per-thread
  // scratch size it by this. Call before reserve(); default 1.
  void set_threads(int threads) { threads_ = threads < 1 ? 1 : threads; }
  int threads() const { return threads_; }
  // The compute precision (engine/core/precision.h says which ops compute in bf16). Call before
  // reserve(); default fp32. Ops that stay fp32 ignore it.
  void set_precision(Precision p);
  Precision precision() const { return precision_; }
  // Kernel choice (engine/graph/kernel_select.h measures them): the names of the kernels this
  // node can run for its shapes, precision and this CPU, the first being what it runs when none
  // was chosen; an op with a single kernel says {"default"}. set_kernel() takes one of them
  // (invalid_input otherwise, listing them); call before reserve() (or reserve() again after).
  virtual std::vector<std::string> kernels() const { return {"default"}; }
  const std::string& kernel() const { return kernel_; }
  Status set_kernel(const std::string& name);
  // Makes this op (of the same kind) a twin of `other`: its node, shapes, tensors, threads and
  // precision, running kernel `kernel`; reserve() comes next. For timing one node's kernels side
  // by side (engine/graph/kernel_select.h) without touching the model's op. Not for ops with a
  // fused ReLU (only convolution and linear nodes have kernel choices).
  Status twin_of(const Op& other, const std::string& kernel);
  // Allocates per-batch state for batches of up to max_batch samples (idempotent).
  virtual void reserve(int /*max_batch*/) {}
  // Frees what reserve() allocated; reserve() runs again before the next forward.
  virtual void release() {}
  // Scratch floats forward/backward need for a batch of B (shared across ops). Valid after
  // setup(); the kernels' one statement of it is op_memory() (engine/ops/op_memory.h), for this
  // op's threads, precision and kernel, plus a library kernel's own (library_memory()).
  int64_t workspace_floats(int batch) const {
    return op_memory(node_, in_, out_, batch, compute()).workspace_floats +
           library_memory(batch).workspace_floats;
  }
  // Floats (or 4-byte values) reserve(max_batch) allocates for the op's own state (masks,
  // argmax, statistics, saved columns, rounded weights, per-thread scratch): the memory model's
  // per-op term. Valid after setup(); op_memory() states it, as above.
  int64_t saved_floats(int max_batch) const {
    return op_memory(node_, in_, out_, max_batch, compute()).saved_floats +
           library_memory(max_batch).saved_floats;
  }
  OpCompute compute() const { return {threads_, precision_, kernel_}; }

  // Asks the op to apply a ReLU to its output itself (engine/graph/backward_plan.h's fusion):
  // forward then writes max(0, y), and backward receives the ReLU's output gradient with `out`
  // the ReLU's output, and masks it. Returns whether the op does so (default: no).
  virtual bool fuse_relu() { return false; }
  // in[k] (B, in_shape(k)) -> out (B, out_shape). Precondition: B <= the reserved max batch.
  virtual void forward(const OpContext& ctx, const float* const* in, float* out, int batch) = 0;
  // Parameter gradients (written or added per accumulate_grad(t)) and, where din[k].data is
  // set, input gradients. `in` and `out` are the values forward saw and produced.
  virtual void backward(const OpContext& ctx, const float* const* in, const float* out,
                        const float* dout, const GradOut* din, int batch) = 0;

 protected:
  // Kernel-specific preparation after setup() stored the shapes.
  virtual Status configure() { return ok_status(); }
  // Switches to kernel `name` (one of kernels(); set_kernel() checked it).
  virtual void use_kernel(const std::string& /*name*/) {}
  // What a kernel of another library (oneDNN) allocates for batches of up to `batch` beyond
  // op_memory()'s part: its primitives' scratch, which only that library can say.
  virtual OpMemory library_memory(int /*batch*/) const { return {}; }
  const recipes::OpAttrs& attrs() const { return node_.attrs; }
  // Whether backward adds to parameter tensor t's gradient instead of writing it.
  bool accumulate_grad(const OpContext& ctx, size_t t) const {
    return ctx.accumulate_param_grads || (t < grad_accumulate_.size() && grad_accumulate_[t]);
  }
  int64_t in_numel(size_t k = 0) const { return recipes::numel(in_[k]); }
  int64_t out_numel() const { return recipes::numel(out_); }

  recipes::Node node_;
  std::vector<Shape> in_;
  Shape out_;
  std::vector<float*> params_, grads_, state_;
  std::vector<bool> grad_accumulate_;
  int threads_ = 1;
  Precision precision_ = Precision::kFp32;
  std::string kernel_;  // "" until set_kernel() or the first kernels() (kernel_of())
};

// The element size of what an op of kind `op` keeps for its backward (its output activation, and
// its own saved tensors: Op::saved_floats) in precision `p`, per element, for the memory model:
//   activation_bytes_stored():   what this engine stores: 4 bytes for every op, in fp32 and in
//                                bf16 alike (bf16 values are held in float buffers; the
//                                bf16 ops' rounded operand copies live in the workspace);
//   activation_bytes_autocast(): what PyTorch's CPU autocast stores: 2 bytes for the outputs of
//                                the bf16 ops (conv2d, linear, attention) in bf16, 4 for the rest
//                                (norms, softmax, element-wise ops run in fp32 here).
int activation_bytes_stored(recipes::OpKind op, Precision p);
int activation_bytes_autocast(recipes::OpKind op, Precision p);

// The CPU kernel of `op`. Never fails: an op kind without a CPU kernel is a build error
// (registry.cc's switch covers every kind).
std::unique_ptr<Op> make_cpu_op(recipes::OpKind op);

// Writes (accumulate false) or adds (true) n floats of src into dst: the last step of most
// backward kernels' input gradients.
void store_grad(float* dst, const float* src, int64_t n, bool accumulate);
// The same on the rank's threads.
void store_grad(ThreadPool& pool, float* dst, const float* src, int64_t n, bool accumulate);

}  // namespace dltune::engine
