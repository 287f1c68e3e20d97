// GpuModel: compiled in every build (it only uses gpu_context.h / gpu_layers.h, which have a
// no-CUDA implementation), so the layout logic is one piece of code.
#include "engine/gpu/gpu_model.h"

#include <algorithm>

#include "engine/gpu/gpu_layers.h"

namespace dltune::engine::gpu {

Result<std::unique_ptr<GpuModel>> GpuModel::build(const ModelSpec& spec, GpuContext& ctx) {
  // The same checks and messages as Model::build.
  const std::string where = "model '" + spec.name + "'";
  if (spec.layers.empty()) return invalid_input(where + ": has no layers");
  if (spec.input.size() <= 0 || spec.input.c <= 0 || spec.input.h <= 0 || spec.input.w <= 0)
    return invalid_input(where + ": input shape " + spec.input.str() + " is not positive");
  if (spec.classes < 2)
    return invalid_input(where + ": needs at least 2 classes, got " + std::to_string(spec.classes));
  std::unique_ptr<GpuModel> m(new GpuModel(spec, ctx));
  Dims d = spec.input;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    auto layer = make_gpu_layer(spec.layers[i], ctx);
    if (!layer) return layer.error().wrap(where);
    auto out = (*layer)->setup(d);
    if (!out)
      return out.error().wrap(where + ": layer " + std::to_string(i) + " (" + (*layer)->kind() +
                              ") with input " + d.str());
    d = *out;
    m->offsets_.push_back(m->num_params_);
    m->num_params_ += (*layer)->num_params();
    m->layers_.push_back(std::move(*layer));
  }
  if (d.size() != spec.classes)
    return invalid_input(where + ": the last layer produces " + d.str() + " but the model has " +
                         std::to_string(spec.classes) + " classes");
  const size_t n = static_cast<size_t>(std::max<int64_t>(m->num_params_, 1));
  auto params = DeviceBuffer::alloc_floats(n);
  if (!params) return params.error().wrap(where + ": parameters");
  auto grads = DeviceBuffer::alloc_floats(n);
  if (!grads) return grads.error().wrap(where + ": gradients");
  m->params_ = std::move(*params);
  m->grads_ = std::move(*grads);
  m->bind_all();
  return m;
}

void GpuModel::bind_all() {
  for (size_t i = 0; i < layers_.size(); ++i)
    layers_[i]->bind(params_.floats() + offsets_[i], grads_.floats() + offsets_[i]);
}

Status GpuModel::init_params(uint64_t seed) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    Rng rng(Rng::mix(seed, i));
    layers_[i]->init_params(rng);
  }
  return ctx_.synchronize();
}

Status GpuModel::copy_params_from(const Model& model) {
  bool same = model.num_params() == num_params_ && model.spec().layers.size() == layers_.size();
  for (int i = 0; same && i < num_layers(); ++i) same = model.param_offset(i) == offsets_[i];
  if (!same)
    return invalid_input("model '" + model.spec().name + "' (" +
                         std::to_string(model.num_params()) +
                         " parameters) does not have the layout of GPU model '" + spec_.name +
                         "' (" + std::to_string(num_params_) + " parameters)");
  return copy_params_from_host(model.params());
}

Status GpuModel::copy_params_from_host(const float* host) {
  ctx_.to_device(params_.data(), host, sizeof(float) * num_params_);
  return ctx_.synchronize();
}

Status GpuModel::copy_params_to(float* host) {
  ctx_.to_host(host, params_.data(), sizeof(float) * num_params_);
  return ctx_.synchronize();
}

Status GpuModel::copy_grads_to(float* host) {
  ctx_.to_host(host, grads_.data(), sizeof(float) * num_params_);
  return ctx_.synchronize();
}

Status GpuModel::reserve(int max_batch) {
  if (max_batch <= max_batch_) return ok_status();
  DLTUNE_TRY(ctx_.synchronize());  // the old buffers may still be in use
  acts_.clear();
  int64_t max_in = 0;
  for (auto& l : layers_) {
    l->reserve(max_batch);
    auto a = DeviceBuffer::alloc_floats(static_cast<size_t>(max_batch * l->out_dims().size()));
    if (!a) return a.error().wrap("model '" + spec_.name + "': activations");
    acts_.push_back(std::move(*a));
    max_in = std::max({max_in, l->in_dims().size(), l->out_dims().size()});
  }
  for (auto& b : dbuf_) {
    b = DeviceBuffer();
    auto a = DeviceBuffer::alloc_floats(static_cast<size_t>(max_batch * max_in));
    if (!a) return a.error().wrap("model '" + spec_.name + "': activation gradients");
    b = std::move(*a);
  }
  max_batch_ = max_batch;
  return ctx_.synchronize();
}

Result<const float*> GpuModel::forward(const float* input, int batch, bool training,
                                       uint64_t seed) {
  if (batch <= 0 || batch > max_batch_)
    return invalid_input("batch " + std::to_string(batch) + " outside (0, " +
                         std::to_string(max_batch_) + "]: call reserve() first");
  LayerContext lc{nullptr, training, 0};
  const float* x = input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    lc.seed = Rng::mix(seed, i);
    layers_[i]->forward(lc, x, acts_[i].floats(), batch);
    x = acts_[i].floats();
  }
  DLTUNE_TRY_CTX(ctx_.take_status(), "forward of model '" + spec_.name + "'");
  return x;
}

Status GpuModel::backward(const float* input, const float* dlogits, int batch,
                          const std::function<void(int64_t)>& ready) {
  LayerContext lc{nullptr, true, 0};
  const float* dout = dlogits;
  int which = 0;
  for (int i = num_layers() - 1; i >= 0; --i) {
    Layer& l = *layers_[i];
    const float* in = i > 0 ? acts_[i - 1].floats() : input;
    float* din = i > 0 ? dbuf_[which].floats() : nullptr;  // the input's gradient is not needed
    l.backward(lc, in, acts_[i].floats(), dout, din, batch);
    if (l.num_params() > 0 && ready) ready(offsets_[i]);
    dout = din;
    which ^= 1;
  }
  DLTUNE_TRY_CTX(ctx_.take_status(), "backward of model '" + spec_.name + "'");
  return ok_status();
}

}  // namespace dltune::engine::gpu
