#include "engine/model.h"

#include <algorithm>

#include "engine/conv2d.h"

namespace dltune::engine {

Result<Model> Model::build(const ModelSpec& spec) {
  const std::string where = "model '" + spec.name + "'";
  if (spec.layers.empty()) return invalid_input(where + ": has no layers");
  if (spec.input.size() <= 0 || spec.input.c <= 0 || spec.input.h <= 0 || spec.input.w <= 0)
    return invalid_input(where + ": input shape " + spec.input.str() + " is not positive");
  if (spec.classes < 2)
    return invalid_input(where + ": needs at least 2 classes, got " + std::to_string(spec.classes));
  Model m;
  m.spec_ = spec;
  Dims d = spec.input;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    auto layer = make_layer(spec.layers[i]);
    auto out = layer->setup(d);
    if (!out)
      return out.error().wrap(where + ": layer " + std::to_string(i) + " (" + layer->kind() +
                              ") with input " + d.str());
    d = *out;
    m.offsets_.push_back(m.num_params_);
    m.num_params_ += layer->num_params();
    m.layers_.push_back(std::move(layer));
  }
  if (d.size() != spec.classes)
    return invalid_input(where + ": the last layer produces " + d.str() + " but the model has " +
                         std::to_string(spec.classes) + " classes");
  m.params_.resize(static_cast<size_t>(m.num_params_));
  m.own_grads_.resize(static_cast<size_t>(m.num_params_));
  m.grads_ = m.own_grads_.data();
  m.bind_all();
  return m;
}

void Model::bind_all() {
  for (size_t i = 0; i < layers_.size(); ++i)
    layers_[i]->bind(params_.data() + offsets_[i], grads_ + offsets_[i]);
}

void Model::set_grad_buffer(float* grads) {
  grads_ = grads ? grads : own_grads_.data();
  bind_all();
}

void Model::init_params(uint64_t seed) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    Rng rng(Rng::mix(seed, i));
    layers_[i]->init_params(rng);
  }
}

void Model::reserve(int max_batch) {
  if (max_batch <= max_batch_) return;
  max_batch_ = max_batch;
  acts_.resize(layers_.size());
  int64_t max_in = 0, ws = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = *layers_[i];
    l.reserve(max_batch);
    acts_[i].resize_uninitialized(static_cast<size_t>(max_batch * l.out_dims().size()));
    max_in = std::max({max_in, l.in_dims().size(), l.out_dims().size()});
    ws = std::max(ws, l.workspace_floats(max_batch));
  }
  // Activations, backward's input gradients and the workspace are scratch that every layer
  // writes before it reads (forward outputs, din, im2col columns, GEMM outputs with beta 0):
  // sized for evaluation's batch of 256, they are not zeroed, so the pages a training batch
  // never uses are never faulted in (zeroing them was most of a trainer's set-up here).
  for (auto& b : dbuf_) b.resize_uninitialized(static_cast<size_t>(max_batch * max_in));
  workspace_.resize_uninitialized(static_cast<size_t>(std::max<int64_t>(ws, 1)));
}

void Model::release() {
  for (auto& l : layers_) l->release();
  acts_.clear();
  for (auto& b : dbuf_) b.resize(0);
  workspace_.resize(0);
  released_ = max_batch_ > 0;
}

const float* Model::forward(const float* input, int batch, bool training, uint64_t seed) {
  if (released_) {
    released_ = false;
    const int m = max_batch_;
    max_batch_ = 0;
    reserve(m);
  }
  DLTUNE_CHECK(batch > 0 && batch <= max_batch_, "batch " + std::to_string(batch) +
                                                     " outside (0, " + std::to_string(max_batch_) +
                                                     "]: call reserve() first");
  LayerContext ctx{workspace_.data(), training, 0};
  const float* x = input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    ctx.seed = Rng::mix(seed, i);
    layers_[i]->forward(ctx, x, acts_[i].data(), batch);
    x = acts_[i].data();
  }
  return x;
}

void Model::backward(const float* input, const float* dlogits, int batch,
                     const std::function<void(int64_t)>& ready) {
  LayerContext ctx{workspace_.data(), true, 0};
  const float* dout = dlogits;
  int which = 0;
  for (int i = num_layers() - 1; i >= 0; --i) {
    Layer& l = *layers_[i];
    const float* in = i > 0 ? acts_[i - 1].data() : input;
    // The first layer's input gradient is never needed: skip it (a whole gemm for linear).
    float* din = i > 0 ? dbuf_[which].data() : nullptr;
    l.backward(ctx, in, acts_[i].data(), dout, din, batch);
    if (l.num_params() > 0 && ready) ready(offsets_[i]);
    dout = din;
    which ^= 1;
  }
}

double Model::forward_flops_per_sample() const {
  double f = 0.0;
  for (const auto& l : layers_) {
    std::string k = l->kind();
    if (k == "linear") f += 2.0 * static_cast<double>(l->num_params());
    if (k == "conv2d")
      f += 2.0 * static_cast<double>(l->num_params() - l->out_dims().c) *
           static_cast<double>(l->out_dims().h) * l->out_dims().w;
  }
  return f;
}

}  // namespace dltune::engine
