// Trainer on the GPU (config.device == "gpu"): the device model and its step. See trainer.h
// for how gradient buckets are reduced with NCCL and with host communicators.
//
// The step is compute_cpu()'s, on the device: the local batch is uploaded once, then each
// micro-batch (chunk) runs forward, the loss (its rows' losses into their slice of `rows`) and
// backward, the later chunks adding to the gradients; the buckets' allreduces start during the
// last chunk's backward. Then clipping by the global norm, and SGD or AdamW, all on the device;
// the host sees only the per-row losses. The optimizer's state lives on the device too (`slots`,
// in Optimizer::state() order), or with config.offload_optimizer in pinned host memory,
// streamed through the device chunk by chunk for the update (`offloaded`, engine/gpu/offload.h:
// the same kernels on each chunk); the host optimizer keeps the step count (AdamW's bias
// correction) and receives the moments only for checkpoints (sync_host_params).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "comm/allreduce.h"
#include "engine/gpu/gpu_model.h"
#include "engine/gpu/gpu_ops.h"
#include "engine/gpu/offload.h"
#include "engine/train/trainer.h"

namespace dltune::engine {

using Clock = std::chrono::steady_clock;

struct Trainer::Gpu {
  std::unique_ptr<gpu::GpuContext> ctx;
  std::unique_ptr<gpu::GpuModel> model;
  gpu::DeviceBuffer input, labels, dlogits, rows, small, norm;
  std::vector<gpu::DeviceBuffer> slots;            // optimizer state, opt_->state() order
  std::unique_ptr<gpu::OffloadedState> offloaded;  // instead of slots, offloaded
  std::vector<double> host_rows;
};

void Trainer::GpuDeleter::operator()(Gpu* g) const {
  if (g && g->ctx) (void)g->ctx->synchronize();
  delete g;
}

Status Trainer::setup_gpu(int max_batch) {
  auto ctx = gpu::GpuContext::create(0);
  if (!ctx) return ctx.error();
  std::unique_ptr<Gpu, GpuDeleter> g(new Gpu());
  g->ctx = std::move(*ctx);
  auto model = gpu::GpuModel::build(model_->graph(), model_->name(), *g->ctx);
  if (!model) return model.error();
  g->model = std::move(*model);
  // The device model holds one micro-batch (the host model's reserved chunk), the input and
  // label buffers the whole local batch.
  const int chunk = std::max(model_->max_batch(), 1);
  DLTUNE_TRY(g->model->reserve(chunk));
  const size_t n = static_cast<size_t>(model_->num_params());
  const auto rows = static_cast<size_t>(max_batch * predictions_);
  const auto chunk_rows = static_cast<size_t>(chunk * predictions_);
  auto alloc = [](gpu::DeviceBuffer& b, size_t bytes) -> Status {
    auto a = gpu::DeviceBuffer::alloc(std::max<size_t>(bytes, 16));
    if (!a) return a.error();
    b = std::move(*a);
    return ok_status();
  };
  DLTUNE_TRY(alloc(g->input, sizeof(float) * max_batch * model_->input_numel()));
  DLTUNE_TRY(alloc(g->labels, sizeof(int32_t) * rows));
  DLTUNE_TRY(alloc(g->dlogits, sizeof(float) * chunk_rows * classes_));
  DLTUNE_TRY(alloc(g->rows, sizeof(double) * rows));
  DLTUNE_TRY(alloc(g->small, 64));
  DLTUNE_TRY(alloc(g->norm, sizeof(double) * gpu::clip_scratch_doubles()));
  if (config_.offload_optimizer) {
    auto off = gpu::OffloadedState::create(*g->ctx, static_cast<int>(opt_->state().size()),
                                           static_cast<int64_t>(n));
    if (!off) return off.error().wrap("offloading the optimizer state to host memory");
    g->offloaded = std::move(*off);
  } else {
    g->slots.resize(opt_->state().size());
    for (auto& s : g->slots) DLTUNE_TRY(alloc(s, sizeof(float) * n));
  }
  g->host_rows.resize(rows);
  gpu_ = std::move(g);
  // Every rank starts from rank 0's parameters and state (the host broadcast ran before, or,
  // with NCCL, the broadcast below).
  DLTUNE_TRY(gpu_->model->copy_params_from(*model_));
  if (nccl_) {
    const auto state = static_cast<size_t>(model_->num_state());
    DLTUNE_TRY_CTX(
        nccl_->broadcast_device(gpu_->model->params(), n * sizeof(float), 0, gpu_->ctx->stream()),
        std::string("broadcasting the initial parameters"));
    if (state > 0)
      DLTUNE_TRY_CTX(nccl_->broadcast_device(gpu_->model->state(), state * sizeof(float), 0,
                                             gpu_->ctx->stream()),
                     std::string("broadcasting the initial model state"));
    DLTUNE_TRY(nccl_->synchronize(gpu_->ctx->stream()));
    DLTUNE_TRY(gpu_->model->copy_params_to(model_->params()));
    DLTUNE_TRY(gpu_->model->copy_state_to(model_->state()));
  }
  return ok_status();
}

Status Trainer::sync_host_params() const {
  if (!gpu_) return ok_status();
  DLTUNE_TRY(gpu_->model->copy_params_to(model_->params()));
  DLTUNE_TRY(gpu_->model->copy_state_to(model_->state()));
  const auto slots = opt_->state();
  const size_t bytes = sizeof(float) * static_cast<size_t>(model_->num_params());
  for (size_t i = 0; i < slots.size() && i < gpu_->slots.size(); ++i)
    gpu_->ctx->to_host(slots[i]->data(), gpu_->slots[i].data(), bytes);
  DLTUNE_TRY(gpu_->ctx->synchronize());
  if (gpu_->offloaded)  // current: the last update's stores are behind the synchronize
    for (size_t i = 0; i < slots.size(); ++i)
      std::memcpy(slots[i]->data(), gpu_->offloaded->host(static_cast<int>(i)), bytes);
  return ok_status();
}

Status Trainer::upload_state_gpu() {
  DLTUNE_TRY(gpu_->model->copy_params_from_host(model_->params()));
  DLTUNE_TRY(gpu_->model->copy_state_from_host(model_->state()));
  const auto slots = opt_->state();
  const size_t bytes = sizeof(float) * static_cast<size_t>(model_->num_params());
  for (size_t i = 0; i < slots.size() && i < gpu_->slots.size(); ++i)
    gpu_->ctx->to_device(gpu_->slots[i].data(), slots[i]->data(), bytes);
  DLTUNE_TRY(gpu_->ctx->synchronize());  // no update in flight: the host state may be written
  if (gpu_->offloaded)
    for (size_t i = 0; i < slots.size(); ++i)
      std::memcpy(gpu_->offloaded->host(static_cast<int>(i)), slots[i]->data(), bytes);
  return ok_status();
}

Result<const float*> Trainer::eval_logits_gpu(const float* images, int b) {
  gpu::GpuContext& ctx = *gpu_->ctx;
  ctx.to_device(gpu_->input.data(), images, sizeof(float) * b * model_->input_numel());
  auto logits = gpu_->model->forward(gpu_->input.floats(), b, false);
  if (!logits) return logits.error();
  ctx.to_host(dlogits_.data(), *logits, sizeof(float) * b * model_->output_numel());
  DLTUNE_TRY(ctx.synchronize());
  return dlogits_.data();
}

Status Trainer::stage_bucket_to_host(size_t index) {
  const Bucket& b = buckets_[index];
  gpu_->ctx->to_host(model_->grads() + b.begin, gpu_->model->grads() + b.begin,
                     sizeof(float) * static_cast<size_t>(b.end - b.begin));
  return gpu_->ctx->synchronize();
}

Status Trainer::allreduce_small(void* v, size_t count, comm::DataType type, comm::ReduceOp op) {
  if (!comm_) return ok_status();
  if (!nccl_) {
    comm::AllreduceOptions opts;
    opts.algorithm = comm::Algorithm::kRecursiveDoubling;
    return comm::allreduce(*comm_, v, v, count, type, op, opts);
  }
  // NCCL reduces device memory only: stage the few values through the device.
  const size_t bytes = count * comm::dtype_size(type);
  gpu::GpuContext& ctx = *gpu_->ctx;
  ctx.to_device(gpu_->small.data(), v, bytes);
  DLTUNE_TRY(nccl_->allreduce_device(gpu_->small.data(), gpu_->small.data(), count, type, op,
                                     ctx.stream()));
  ctx.to_host(v, gpu_->small.data(), bytes);
  DLTUNE_TRY(nccl_->synchronize(ctx.stream()));
  return ctx.synchronize();
}

Result<double> Trainer::compute_gpu(int B, uint64_t seed, bool traced, StepTimes& tm) {
  gpu::GpuContext& ctx = *gpu_->ctx;
  gpu::GpuModel& m = *gpu_->model;
  const int64_t n = model_->num_params();
  const int M = std::min(config_.microbatches, B);
  const int64_t sz = model_->input_numel(), lw = predictions_;
  const auto rows = static_cast<int>(B * lw);
  const auto denom = static_cast<float>(int64_t{global_batch_} * predictions_);
  ctx.to_device(gpu_->input.data(), input_.data(), sizeof(float) * B * sz);
  ctx.to_device(gpu_->labels.data(), labels_.data(), sizeof(int32_t) * rows);

  // Each bucket is reduced once backward has enqueued its gradients: on the NCCL stream after
  // an event, or (host communicators) after a copy to the host gradient buffer.
  Status st;
  std::vector<bool> started(buckets_.size(), false);
  auto start = [&](size_t i) {
    started[i] = true;
    const Bucket& b = buckets_[i];
    if (traced) bucket_issued_[i] = Clock::now();
    if (nccl_) {
      ctx.comm_waits_for_compute();
      float* g = m.grads() + b.begin;
      if (auto s = nccl_->allreduce_device(g, g, static_cast<size_t>(b.end - b.begin),
                                           comm::DataType::kF32, comm::ReduceOp::kSum,
                                           ctx.comm_stream());
          !s && st)
        st = s;
      return;
    }
    if (auto s = stage_bucket_to_host(i); !s && st) st = s;
    if (config_.overlap) {
      start_bucket(i, traced);
    } else if (st) {
      st = reduce_bucket_blocking(b);
      bucket_done_[i] = Clock::now();
    }
  };
  for (size_t b = 0; b < buckets_.size(); ++b) bucket_left_[b] = buckets_[b].tensors;
  std::function<void(int)> ready;
  if (comm_ && config_.overlap)
    ready = [&](int node) {
      for (int t : m.final_after(node)) {
        const auto b = static_cast<size_t>(bucket_of_[static_cast<size_t>(t)]);
        if (--bucket_left_[b] == 0) {
          bucket_ready_node_[b] = node;
          start(b);
        }
      }
    };
  // Micro-batches as compute_cpu(): chunk sizes, dropout seeds and the order of the gradient
  // sums are the CPU's.
  int offset = 0;
  for (int mb = 0; mb < M; ++mb) {
    const int b = B / M + (mb < B % M ? 1 : 0);
    const float* x = gpu_->input.floats() + offset * sz;
    const uint64_t s = M == 1 ? seed : Rng::mix(seed, static_cast<uint64_t>(rank() * M + mb));
    auto logits = m.forward(x, b, true, s);
    if (!logits) return logits.error().wrap("step " + std::to_string(step_));
    gpu::softmax_cross_entropy(ctx, *logits, gpu_->labels.as<int32_t>() + offset * lw,
                               static_cast<int>(b * lw), classes_, denom, gpu_->dlogits.floats(),
                               gpu_->rows.as<double>() + offset * lw);
    if (mb == 0) tm.forward_end = Clock::now();
    DLTUNE_TRY_CTX(m.backward(x, gpu_->dlogits.floats(), b,
                              mb + 1 == M ? ready : std::function<void(int)>{}, mb > 0),
                   "step " + std::to_string(step_));
    offset += b;
  }
  ctx.to_host(gpu_->host_rows.data(), gpu_->rows.data(), sizeof(double) * rows);
  tm.backward_end = Clock::now();
  if (comm_) {
    for (size_t i = 0; i < buckets_.size(); ++i)  // overlap off: all of them now
      if (!started[i]) start(i);
    if (nccl_) {
      ctx.compute_waits_for_comm();
      if (auto s = nccl_->synchronize(ctx.comm_stream()); !s && st) st = s;
    } else {
      for (auto& r : pending_)
        if (auto s = r.wait(); !s && st) st = s;
      pending_.clear();
      ctx.to_device(m.grads(), model_->grads(), sizeof(float) * static_cast<size_t>(n));
    }
    if (traced)
      for (size_t i = 0; nccl_ && i < buckets_.size(); ++i) bucket_done_[i] = Clock::now();
  }
  if (!st)
    return std::move(st).error().wrap("allreducing gradients at step " + std::to_string(step_));
  tm.reduce_end = Clock::now();
  if (config_.clip_grad_norm > 0.0)
    gpu::clip_grad_norm(ctx, m.grads(), n, config_.clip_grad_norm, gpu_->norm.as<double>());
  const auto lr = static_cast<float>(learning_rate(config_, step_));
  opt_->set_steps(opt_->steps() + 1);  // as the host optimizer's step() counts
  // Elements [begin, begin + count) with the state vectors at `state` (on the device).
  auto update = [&](int64_t begin, int64_t count, float* const* state) {
    if (config_.optimizer == "adamw")
      gpu::adamw_step(ctx, m.params() + begin, m.grads() + begin, state[0], state[1], count, lr,
                      static_cast<float>(config_.beta1), static_cast<float>(config_.beta2),
                      static_cast<float>(config_.eps), static_cast<float>(config_.weight_decay),
                      opt_->steps());
    else
      gpu::sgd_step(ctx, m.params() + begin, m.grads() + begin, state[0], count, lr,
                    static_cast<float>(config_.momentum), static_cast<float>(config_.weight_decay));
  };
  if (gpu_->offloaded) {
    gpu_->offloaded->update(update);
  } else {
    float* state[2] = {gpu_->slots[0].floats(),
                       gpu_->slots.size() > 1 ? gpu_->slots[1].floats() : nullptr};
    update(0, n, state);
  }
  DLTUNE_TRY_CTX(ctx.synchronize(), "step " + std::to_string(step_) + " on the GPU");
  tm.update_end = Clock::now();
  double loss = 0.0;
  for (int i = 0; i < rows; ++i) loss += gpu_->host_rows[static_cast<size_t>(i)];
  return loss;
}

}  // namespace dltune::engine
