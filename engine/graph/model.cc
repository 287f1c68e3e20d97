#include "engine/graph/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/core/rng.h"

namespace dltune::engine {

Result<Model> Model::build(const recipes::Graph& graph, const std::string& name,
                           Model* share_with) {
  const std::string where = "model '" + name + "'";
  Model m;
  m.name_ = name;
  m.graph_ = graph;
  m.info_ = recipes::analyze_graph(graph);
  if (!m.info_.ok()) {
    const auto& [index, message] = m.info_.problems.front();
    if (index >= graph.nodes.size()) return invalid_input(where + ": " + message);
    const recipes::Node& n = graph.nodes[index];
    return invalid_input(where + ": node '" + n.name + "' (" + std::string(recipes::op_name(n.op)) +
                         "): " + message);
  }
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const recipes::Node& n = graph.nodes[i];
    std::vector<recipes::Shape> in;
    for (int src : m.info_.inputs[i])
      in.push_back(src < 0 ? graph.input : m.info_.outputs[static_cast<size_t>(src)]);
    auto op = make_cpu_op(n.op);
    DLTUNE_TRY_CTX(op->setup(n, in, m.info_.outputs[i]),
                   where + ": node '" + n.name + "' (" + std::string(recipes::op_name(n.op)) + ")");
    m.ops_.push_back(std::move(op));
    m.in_ptrs_.emplace_back(in.size());
    m.din_.emplace_back(in.size());
  }
  // ReLUs fused into the batch norm or add before them (backward_plan.h).
  const std::vector<int> fused = fused_relus(graph, m.info_);
  for (int into : fused) {
    if (into >= 0) {
      DLTUNE_CHECK(m.ops_[static_cast<size_t>(into)]->fuse_relu(), "fused_relus: not fusable");
    }
  }
  m.plan_ = plan_backward(m.info_, fused);
  if (share_with) {
    m.share_parameters_of(*share_with);
    return m;
  }
  m.own_params_.resize(static_cast<size_t>(m.info_.parameters));
  m.own_grads_.resize_uninitialized(static_cast<size_t>(m.info_.parameters));
  m.own_state_.resize(static_cast<size_t>(m.info_.state_floats));
  m.params_ = m.own_params_.data();
  m.grads_ = m.own_grads_.data();
  m.state_ = m.own_state_.data();
  m.bind_all();
  return m;
}

void Model::set_thread_pool(ThreadPool* pool) {
  pool_ = pool != nullptr ? pool : &ThreadPool::serial();
  for (auto& op : ops_) op->set_threads(pool_->threads());
  invalidate_reserve();
}

void Model::set_precision(Precision p) {
  precision_ = p;
  for (auto& op : ops_) op->set_precision(p);
  invalidate_reserve();
}

Status Model::set_kernels(const KernelChoices& choices) {
  // Checked whole before any node changes: a bad choice changes nothing.
  std::vector<std::pair<size_t, std::string>> checked;
  for (const auto& [name, kernel] : choices) {
    size_t i = 0;
    while (i < graph_.nodes.size() && graph_.nodes[i].name != name) ++i;
    if (i == graph_.nodes.size())
      return invalid_input("model '" + name_ + "': kernel choice for node '" + name +
                           "', which the model does not have");
    const std::vector<std::string> names = ops_[i]->kernels();
    if (std::find(names.begin(), names.end(), kernel) == names.end())
      return ops_[i]->set_kernel(kernel).error().wrap("model '" + name_ + "'");
    checked.emplace_back(i, kernel);
  }
  for (const auto& [i, kernel] : checked) DLTUNE_TRY(ops_[i]->set_kernel(kernel));
  invalidate_reserve();
  return ok_status();
}

KernelChoices Model::kernels() const {
  KernelChoices k;
  for (size_t i = 0; i < ops_.size(); ++i) k[graph_.nodes[i].name] = ops_[i]->kernel();
  return k;
}

void Model::invalidate_reserve() {
  if (max_batch_ > 0 && !released_) release();
}

void Model::bind_all() {
  for (size_t i = 0; i < ops_.size(); ++i) {
    std::vector<float*> p, g, s;
    for (int t : info_.node_params[i]) {
      const int64_t off = info_.params[static_cast<size_t>(t)].offset;
      p.push_back(params_ + off);
      g.push_back(grads_ + off);
    }
    for (int t : info_.node_state[i])
      s.push_back(state_ + info_.state[static_cast<size_t>(t)].offset);
    ops_[i]->bind(std::move(p), std::move(g), plan_.param_accumulate[i], std::move(s));
  }
}

void Model::zero_own_grads_once() {
  if (own_grads_zeroed_ || grads_ != own_grads_.data() || own_grads_.size() == 0) return;
  std::memset(own_grads_.data(), 0, own_grads_.size() * sizeof(float));
  own_grads_zeroed_ = true;
}

void Model::set_grad_buffer(float* grads) {
  grads_ = grads ? grads : own_grads_.data();
  bind_all();
}

void Model::share_parameters_of(Model& owner) {
  DLTUNE_CHECK(owner.num_params() == num_params() && owner.num_state() == num_state(),
               "share_parameters_of: another graph");
  params_ = owner.params_;
  grads_ = owner.grads_;
  state_ = owner.state_;
  own_params_.resize(0);
  own_grads_.resize(0);
  own_state_.resize(0);
  bind_all();
}

namespace {

void init_tensor(const recipes::ParamDef& d, Rng& rng, float* v, int64_t n) {
  using recipes::Init;
  switch (d.init) {
    case Init::kUniformFanIn: {
      const float bound = 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(d.fan_in, 1)));
      for (int64_t i = 0; i < n; ++i) v[i] = rng.uniform(-bound, bound);
      break;
    }
    case Init::kHeNormal: {
      const float std = std::sqrt(2.0f / static_cast<float>(std::max<int64_t>(d.fan_out, 1)));
      for (int64_t i = 0; i < n; ++i) v[i] = std * rng.normal();
      break;
    }
    case Init::kNormal:
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(d.std) * rng.normal();
      break;
    case Init::kNormalOne:
      for (int64_t i = 0; i < n; ++i) v[i] = rng.normal();
      break;
    case Init::kZeros:
      std::fill(v, v + n, 0.0f);
      break;
    case Init::kOnes:
      std::fill(v, v + n, 1.0f);
      break;
  }
}

}  // namespace

void Model::init_params(uint64_t seed) {
  // Node i's own tensors, in order, from one stream (a tied tensor belongs to its owner).
  for (size_t i = 0; i < ops_.size(); ++i) {
    Rng rng(Rng::mix(seed, static_cast<uint64_t>(first_node_) + i));
    for (const auto& t : info_.params)
      if (t.node == static_cast<int>(i))
        init_tensor(t.def, rng, params_ + t.offset, recipes::numel(t.shape));
  }
  for (const auto& t : info_.state) {
    Rng unused(0);
    init_tensor(t.def, unused, state_ + t.offset, recipes::numel(t.shape));
  }
}

void Model::share_scratch_of(Model& owner) {
  DLTUNE_CHECK(owner.plan_.slot_floats == plan_.slot_floats, "share_scratch_of: another graph");
  scratch_owner_ = &owner;
  slots_.clear();
  workspace_.resize(0);
}

void Model::ensure_reserved() {
  if (!released_) return;
  released_ = false;
  const int m = max_batch_;
  max_batch_ = 0;
  reserve(m);
}

void Model::reserve(int max_batch) {
  if (scratch_owner_) {
    scratch_owner_->ensure_reserved();
    scratch_owner_->reserve(max_batch);
  }
  if (max_batch <= max_batch_) return;
  max_batch_ = max_batch;
  acts_.resize(ops_.size());
  int64_t ws = 0, bytes = 0;
  const auto B = static_cast<size_t>(max_batch);
  for (size_t i = 0; i < ops_.size(); ++i) {
    Op& op = *ops_[i];
    op.reserve(max_batch);
    // Activations, gradients and the workspace are scratch that every op writes before it
    // reads, so they are not zeroed: pages a smaller batch never uses are never faulted in.
    // A fused ReLU's output is the buffer of the node it is fused into.
    const size_t n =
        plan_.fused_into[i] >= 0 ? 0 : B * static_cast<size_t>(recipes::numel(info_.outputs[i]));
    acts_[i].resize_uninitialized(n);
    bytes += static_cast<int64_t>(n * sizeof(float));
    ws = std::max(ws, op.workspace_floats(max_batch));
  }
  if (!scratch_owner_) {
    slots_.resize(plan_.slot_floats.size());
    for (size_t s = 0; s < slots_.size(); ++s) {
      slots_[s].resize_uninitialized(B * static_cast<size_t>(plan_.slot_floats[s]));
      bytes += static_cast<int64_t>(slots_[s].size() * sizeof(float));
    }
    workspace_.resize_uninitialized(static_cast<size_t>(std::max<int64_t>(ws, 1)));
  }
  for (const auto& op : ops_)
    bytes += op->saved_floats(max_batch) * static_cast<int64_t>(sizeof(float));
  activation_bytes_ = bytes + static_cast<int64_t>(workspace_.size() * sizeof(float));
}

void Model::release() {
  for (auto& op : ops_) op->release();
  acts_.clear();
  slots_.clear();
  workspace_.resize(0);
  released_ = max_batch_ > 0;
}

const float* Model::forward(const float* input, int batch, bool training, uint64_t seed,
                            bool update_state) {
  ensure_reserved();
  if (scratch_owner_) scratch_owner_->ensure_reserved();
  DLTUNE_CHECK(batch > 0 && batch <= max_batch_, "batch " + std::to_string(batch) +
                                                     " outside (0, " + std::to_string(max_batch_) +
                                                     "]: call reserve() first");
  OpContext ctx{workspace(), training, 0, false, update_state, pool_};
  for (size_t i = 0; i < ops_.size(); ++i) {
    auto& ptrs = in_ptrs_[i];
    const auto& srcs = info_.inputs[i];
    if (plan_.fused_into[i] >= 0) continue;  // the node it is fused into wrote its output
    for (size_t k = 0; k < srcs.size(); ++k) ptrs[k] = srcs[k] < 0 ? input : output_of(srcs[k]);
    ctx.seed = Rng::mix(seed, static_cast<uint64_t>(first_node_) + i);
    if (!profiling_) {
      ops_[i]->forward(ctx, ptrs.data(), acts_[i].data(), batch);
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    ops_[i]->forward(ctx, ptrs.data(), acts_[i].data(), batch);
    fwd_s_[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return output_of(num_nodes() - 1);
}

void Model::backward(const float* input, const float* dout, int batch,
                     const std::function<void(int)>& ready, bool accumulate, float* dinput) {
  zero_own_grads_once();
  if (scratch_owner_) scratch_owner_->ensure_reserved();
  std::vector<Buffer>& slots = this->slots();
  OpContext ctx{workspace(), true, 0, accumulate, true, pool_};
  bool input_written = false;
  for (int i = num_nodes() - 1; i >= 0; --i) {
    const auto ui = static_cast<size_t>(i);
    const int slot = plan_.slot[ui];
    const float* dy = slot < 0 ? dout : slots[static_cast<size_t>(slot)].data();
    if (plan_.unread[ui])  // nothing reads this node: its output's gradient is zero
      std::memset(slots[static_cast<size_t>(slot)].data(), 0,
                  sizeof(float) * static_cast<size_t>(batch * recipes::numel(info_.outputs[ui])));
    if (plan_.fused_into[ui] >=
        0) {  // the node it is fused into takes the gradient (the same slot)
      if (ready) ready(i);
      continue;
    }
    auto& ptrs = in_ptrs_[ui];
    auto& din = din_[ui];
    const auto& srcs = info_.inputs[ui];
    for (size_t k = 0; k < srcs.size(); ++k) {
      const int src = srcs[k];
      if (src < 0) {
        ptrs[k] = input;
        din[k] = GradOut{dinput, dinput != nullptr && input_written};
        input_written = input_written || dinput != nullptr;
        continue;
      }
      ptrs[k] = output_of(src);
      const int s = plan_.slot[static_cast<size_t>(src)];
      din[k] = GradOut{slots[static_cast<size_t>(s)].data(), plan_.din_accumulate[ui][k]};
    }
    const auto t0 =
        profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    ops_[ui]->backward(ctx, ptrs.data(), output_of(i), dy, din.data(), batch);
    if (profiling_)
      bwd_s_[ui] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (ready) ready(i);
  }
}

void Model::forward_node(int i, int batch, float* workspace, Op* twin) {
  const auto ui = static_cast<size_t>(i);
  if (plan_.fused_into[ui] >= 0) return;
  auto& ptrs = in_ptrs_[ui];
  const auto& srcs = info_.inputs[ui];
  // The model's input is not kept: a node reading it gets random values of its shape.
  for (size_t k = 0; k < srcs.size(); ++k)
    ptrs[k] = srcs[k] < 0 ? timing_input(ui) : output_of(srcs[k]);
  OpContext ctx{workspace, true, Rng::mix(1, ui), false, false, pool_};
  (twin != nullptr ? twin : ops_[ui].get())->forward(ctx, ptrs.data(), acts_[ui].data(), batch);
}

void Model::backward_node(int i, int batch, const float* dout, float* workspace, Op* twin) {
  const auto ui = static_cast<size_t>(i);
  if (plan_.fused_into[ui] >= 0) return;
  auto& ptrs = in_ptrs_[ui];
  auto& din = din_[ui];
  const auto& srcs = info_.inputs[ui];
  for (size_t k = 0; k < srcs.size(); ++k) {
    if (srcs[k] < 0) {
      ptrs[k] = timing_input(ui);
      din[k] = GradOut{};
      continue;
    }
    ptrs[k] = output_of(srcs[k]);
    const int s = plan_.slot[static_cast<size_t>(srcs[k])];
    din[k] = GradOut{slots()[static_cast<size_t>(s)].data(), false};
  }
  OpContext ctx{workspace, true, 0, false, false, pool_};
  (twin != nullptr ? twin : ops_[ui].get())
      ->backward(ctx, ptrs.data(), output_of(i), dout, din.data(), batch);
}

const float* Model::timing_input(size_t node) {
  const int64_t n = static_cast<int64_t>(max_batch_) * input_numel();
  if (static_cast<int64_t>(timing_input_.size()) < n) {
    timing_input_.resize(static_cast<size_t>(n));
    Rng rng(Rng::mix(7, node));
    // Token models read ids: small non-negative integers are valid for any vocabulary.
    const bool tokens = graph_.input_kind == recipes::InputKind::kTokens;
    for (int64_t j = 0; j < n; ++j)
      timing_input_[static_cast<size_t>(j)] =
          tokens ? static_cast<float>(rng.below(2)) : rng.normal();
  }
  return timing_input_.data();
}

void Model::set_profiling(bool on) {
  profiling_ = on;
  fwd_s_.assign(ops_.size(), 0.0);
  bwd_s_.assign(ops_.size(), 0.0);
}

float* Model::find_tensor(const std::string& name, int64_t* count) {
  for (const auto& t : info_.params)
    if (t.name == name) {
      if (count) *count = recipes::numel(t.shape);
      return params_ + t.offset;
    }
  for (const auto& t : info_.state)
    if (t.name == name) {
      if (count) *count = recipes::numel(t.shape);
      return state_ + t.offset;
    }
  return nullptr;
}

}  // namespace dltune::engine
