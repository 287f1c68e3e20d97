// GpuModel: compiled in every build (it only uses gpu_context.h / gpu_layers.h, which have a
// no-CUDA implementation), so the layout logic is one piece of code.
#include "engine/gpu/gpu_model.h"

#include <algorithm>

#include "engine/core/rng.h"
#include "engine/gpu/gpu_layers.h"

namespace dltune::engine::gpu {

Result<std::unique_ptr<GpuModel>> GpuModel::build(const recipes::Graph& graph,
                                                  const std::string& name, GpuContext& ctx) {
  // The CPU model validates the graph with the same messages and gives the layout.
  auto cpu = Model::build(graph, name);
  if (!cpu) return cpu.error();
  const std::string where = "model '" + name + "'";
  std::unique_ptr<GpuModel> m(new GpuModel(ctx));
  m->name_ = name;
  m->graph_ = graph;
  m->info_ = cpu->info();
  m->plan_ = plan_backward(m->info_);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const recipes::Node& n = graph.nodes[i];
    const std::string node =
        where + ": node '" + n.name + "' (" + std::string(recipes::op_name(n.op)) + ")";
    auto op = make_gpu_op(n, ctx);
    if (!op) return op.error().wrap(node);
    std::vector<recipes::Shape> in;
    for (int src : m->info_.inputs[i])
      in.push_back(src < 0 ? graph.input : m->info_.outputs[static_cast<size_t>(src)]);
    DLTUNE_TRY_CTX((*op)->setup(n, in, m->info_.outputs[i]), node);
    m->ops_.push_back(std::move(*op));
    m->in_ptrs_.emplace_back(in.size());
    m->din_.emplace_back(in.size());
  }
  const size_t n = static_cast<size_t>(std::max<int64_t>(m->info_.parameters, 1));
  auto params = DeviceBuffer::alloc_floats(n);
  if (!params) return params.error().wrap(where + ": parameters");
  auto grads = DeviceBuffer::alloc_floats(n);
  if (!grads) return grads.error().wrap(where + ": gradients");
  auto state =
      DeviceBuffer::alloc_floats(static_cast<size_t>(std::max<int64_t>(m->info_.state_floats, 1)));
  if (!state) return state.error().wrap(where + ": state");
  m->params_ = std::move(*params);
  m->grads_ = std::move(*grads);
  m->state_ = std::move(*state);
  m->bind_all();
  return m;
}

void GpuModel::bind_all() {
  for (size_t i = 0; i < ops_.size(); ++i) {
    std::vector<float*> p, g, s;
    for (int t : info_.node_params[i]) {
      const int64_t off = info_.params[static_cast<size_t>(t)].offset;
      p.push_back(params_.floats() + off);
      g.push_back(grads_.floats() + off);
    }
    for (int t : info_.node_state[i])
      s.push_back(state_.floats() + info_.state[static_cast<size_t>(t)].offset);
    ops_[i]->bind(std::move(p), std::move(g), plan_.param_accumulate[i], std::move(s));
  }
}

Status GpuModel::copy_params_from(const Model& model) {
  if (model.num_params() != num_params() ||
      recipes::describe_graph(model.graph()) != recipes::describe_graph(graph_))
    return invalid_input("model '" + model.name() + "' (" + std::to_string(model.num_params()) +
                         " parameters) does not have the layout of GPU model '" + name_ + "' (" +
                         std::to_string(num_params()) + " parameters)");
  DLTUNE_TRY(copy_state_from_host(model.state()));
  return copy_params_from_host(model.params());
}

Status GpuModel::copy_params_from_host(const float* host) {
  ctx_.to_device(params_.data(), host, sizeof(float) * static_cast<size_t>(num_params()));
  return ctx_.synchronize();
}

Status GpuModel::copy_params_to(float* host) {
  ctx_.to_host(host, params_.data(), sizeof(float) * static_cast<size_t>(num_params()));
  return ctx_.synchronize();
}

Status GpuModel::copy_grads_to(float* host) {
  ctx_.to_host(host, grads_.data(), sizeof(float) * static_cast<size_t>(num_params()));
  return ctx_.synchronize();
}

Status GpuModel::copy_state_from_host(const float* host) {
  if (num_state() == 0) return ok_status();
  ctx_.to_device(state_.data(), host, sizeof(float) * static_cast<size_t>(num_state()));
  return ctx_.synchronize();
}

Status GpuModel::copy_state_to(float* host) {
  if (num_state() == 0) return ok_status();
  ctx_.to_host(host, state_.data(), sizeof(float) * static_cast<size_t>(num_state()));
  return ctx_.synchronize();
}

Status GpuModel::reserve(int max_batch) {
  if (max_batch <= max_batch_) return ok_status();
  DLTUNE_TRY(ctx_.synchronize());  // the old buffers may still be in use
  acts_.clear();
  slots_.clear();
  const auto B = static_cast<size_t>(max_batch);
  for (size_t i = 0; i < ops_.size(); ++i) {
    ops_[i]->reserve(max_batch);
    auto a = DeviceBuffer::alloc_floats(B * static_cast<size_t>(recipes::numel(info_.outputs[i])));
    if (!a) return a.error().wrap("model '" + name_ + "': activations");
    acts_.push_back(std::move(*a));
  }
  for (int64_t floats : plan_.slot_floats) {
    auto a = DeviceBuffer::alloc_floats(B * static_cast<size_t>(floats));
    if (!a) return a.error().wrap("model '" + name_ + "': activation gradients");
    slots_.push_back(std::move(*a));
  }
  max_batch_ = max_batch;
  return ctx_.synchronize();
}

Result<const float*> GpuModel::forward(const float* input, int batch, bool training,
                                       uint64_t seed) {
  if (batch <= 0 || batch > max_batch_)
    return invalid_input("batch " + std::to_string(batch) + " outside (0, " +
                         std::to_string(max_batch_) + "]: call reserve() first");
  OpContext oc{nullptr, training, 0, false, true};
  for (size_t i = 0; i < ops_.size(); ++i) {
    auto& ptrs = in_ptrs_[i];
    const auto& srcs = info_.inputs[i];
    for (size_t k = 0; k < srcs.size(); ++k)
      ptrs[k] = srcs[k] < 0 ? input : acts_[static_cast<size_t>(srcs[k])].floats();
    oc.seed = Rng::mix(seed, i);
    ops_[i]->forward(oc, ptrs.data(), acts_[i].floats(), batch);
  }
  DLTUNE_TRY_CTX(ctx_.take_status(), "forward of model '" + name_ + "'");
  return static_cast<const float*>(acts_.back().floats());
}

Status GpuModel::backward(const float* input, const float* dout, int batch,
                          const std::function<void(int)>& ready, bool accumulate) {
  if (batch <= 0 || batch > max_batch_)
    return invalid_input("batch " + std::to_string(batch) + " outside (0, " +
                         std::to_string(max_batch_) + "]: call reserve() first");
  OpContext oc{nullptr, true, 0, accumulate};
  for (int i = num_nodes() - 1; i >= 0; --i) {
    const auto ui = static_cast<size_t>(i);
    const int slot = plan_.slot[ui];
    const float* dy = slot < 0 ? dout : slots_[static_cast<size_t>(slot)].floats();
    if (plan_.unread[ui])
      ctx_.zero(slots_[static_cast<size_t>(slot)].data(),
                sizeof(float) * static_cast<size_t>(batch * recipes::numel(info_.outputs[ui])));
    auto& ptrs = in_ptrs_[ui];
    auto& din = din_[ui];
    const auto& srcs = info_.inputs[ui];
    for (size_t k = 0; k < srcs.size(); ++k) {
      if (srcs[k] < 0) {  // the input's gradient is not needed
        ptrs[k] = input;
        din[k] = GradOut{};
        continue;
      }
      ptrs[k] = acts_[static_cast<size_t>(srcs[k])].floats();
      const int s = plan_.slot[static_cast<size_t>(srcs[k])];
      din[k] = GradOut{slots_[static_cast<size_t>(s)].floats(), plan_.din_accumulate[ui][k]};
    }
    ops_[ui]->backward(oc, ptrs.data(), acts_[ui].floats(), dy, din.data(), batch);
    if (ready) ready(i);
  }
  DLTUNE_TRY_CTX(ctx_.take_status(), "backward of model '" + name_ + "'");
  return ok_status();
}

}  // namespace dltune::engine::gpu
