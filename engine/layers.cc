#include "engine/layers.h"

#include <cmath>
#include <cstring>

#include <cblas.h>

#include "engine/conv2d.h"
#include "engine/gpu/counter_hash.h"
#include "engine/lrn.h"
#include "engine/pool.h"

namespace dltune::engine {

// ---- Linear ----------------------------------------------------------------------------

Result<Dims> Linear::setup(const Dims& in) {
  if (out_features_ <= 0)
    return invalid_input("linear: output features must be positive, got " +
                         std::to_string(out_features_));
  if (in.size() <= 0) return invalid_input("linear: empty input " + in.str());
  in_ = in;
  in_features_ = static_cast<int>(in.size());
  out_ = Dims{out_features_, 1, 1};
  return out_;
}

int64_t Linear::num_params() const { return int64_t{out_features_} * (in_features_ + 1); }

void Linear::init_params(Rng& rng) {
  // PyTorch's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and bias.
  float bound = 1.0f / std::sqrt(static_cast<float>(in_features_));
  for (int64_t i = 0; i < num_params(); ++i) params_[i] = rng.uniform(-bound, bound);
}

void Linear::forward(const LayerContext&, const float* in, float* out, int batch) {
  // in (B, I), W (O, I), b (O) -> out (B, O) = in W^T + b
  const int O = out_features_, I = in_features_;
  const float* W = params_;
  const float* b = params_ + int64_t{O} * I;
  for (int n = 0; n < batch; ++n) std::memcpy(out + int64_t{n} * O, b, sizeof(float) * O);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, O, I, 1.0f, in, I, W, I, 1.0f, out,
              O);
}

void Linear::backward(const LayerContext&, const float* in, const float*, const float* dout,
                      float* din, int batch) {
  const int O = out_features_, I = in_features_;
  float* dW = grads_;                   // (O, I)
  float* db = grads_ + int64_t{O} * I;  // (O)
  // dW (O, I) = dout^T (O, B) x in (B, I)
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, O, I, batch, 1.0f, dout, O, in, I, 0.0f, dW,
              I);
  std::memset(db, 0, sizeof(float) * O);
  for (int n = 0; n < batch; ++n) {
    const float* d = dout + int64_t{n} * O;
    for (int o = 0; o < O; ++o) db[o] += d[o];
  }
  // din (B, I) = dout (B, O) x W (O, I)
  if (din)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, I, O, 1.0f, dout, O, params_, I,
                0.0f, din, I);
}

// ---- ReLU --------------------------------------------------------------------------------

Result<Dims> Relu::setup(const Dims& in) {
  in_ = out_ = in;
  return out_;
}

void Relu::forward(const LayerContext&, const float* in, float* out, int batch) {
  const int64_t n = batch * in_.size();
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void Relu::backward(const LayerContext&, const float*, const float* out, const float* dout,
                    float* din, int batch) {
  if (!din) return;
  const int64_t n = batch * in_.size();
  // Both loads are unconditional so that the loop vectorises into a compare-and-blend (a
  // conditional load of dout[i] kept GCC from vectorising it: 8 % of a LeNet-5 step).
  for (int64_t i = 0; i < n; ++i) {
    const float d = dout[i];
    din[i] = out[i] > 0.0f ? d : 0.0f;
  }
}

// ---- Dropout -------------------------------------------------------------------------------

Result<Dims> Dropout::setup(const Dims& in) {
  if (!(p_ >= 0.0f && p_ < 1.0f))
    return invalid_input("dropout: probability must be in [0, 1), got " + std::to_string(p_));
  in_ = out_ = in;
  return out_;
}

void Dropout::reserve(int max_batch) { mask_.reserve(static_cast<size_t>(max_batch * in_.size())); }

void Dropout::forward(const LayerContext& ctx, const float* in, float* out, int batch) {
  const int64_t n = batch * in_.size();
  mask_valid_ = ctx.training && p_ > 0.0f;
  if (!mask_valid_) {
    std::memcpy(out, in, sizeof(float) * n);
    return;
  }
  // Counter-based (seed, element index) draws: the GPU dropout kernel makes the same mask.
  const float scale = 1.0f / (1.0f - p_);
  float* m = mask_.data();
  for (int64_t i = 0; i < n; ++i) {
    m[i] = counter_uniform(ctx.seed, static_cast<uint64_t>(i)) < p_ ? 0.0f : scale;
    out[i] = in[i] * m[i];
  }
}

void Dropout::backward(const LayerContext&, const float*, const float*, const float* dout,
                       float* din, int batch) {
  if (!din) return;
  const int64_t n = batch * in_.size();
  if (!mask_valid_) {
    std::memcpy(din, dout, sizeof(float) * n);
    return;
  }
  const float* m = mask_.data();
  for (int64_t i = 0; i < n; ++i) din[i] = dout[i] * m[i];
}

// ---- Flatten -------------------------------------------------------------------------------

Result<Dims> Flatten::setup(const Dims& in) {
  in_ = in;
  out_ = Dims{static_cast<int>(in.size()), 1, 1};
  return out_;
}

void Flatten::forward(const LayerContext&, const float* in, float* out, int batch) {
  std::memcpy(out, in, sizeof(float) * batch * in_.size());
}

void Flatten::backward(const LayerContext&, const float*, const float*, const float* dout,
                       float* din, int batch) {
  if (din) std::memcpy(din, dout, sizeof(float) * batch * in_.size());
}

std::unique_ptr<Layer> make_layer(const LayerSpec& s) {
  switch (s.kind) {
    case LayerSpec::Kind::kLinear:
      return std::make_unique<Linear>(s.out);
    case LayerSpec::Kind::kConv2d:
      return std::make_unique<Conv2d>(s.out, s.kernel, s.stride, s.pad, s.groups);
    case LayerSpec::Kind::kMaxPool:
      return std::make_unique<Pool2d>(Pool2d::Mode::kMax, s.kernel, s.stride, s.pad);
    case LayerSpec::Kind::kAvgPool:
      return std::make_unique<Pool2d>(Pool2d::Mode::kAvg, s.kernel, s.stride, s.pad);
    case LayerSpec::Kind::kRelu:
      return std::make_unique<Relu>();
    case LayerSpec::Kind::kDropout:
      return std::make_unique<Dropout>(s.p);
    case LayerSpec::Kind::kLrn:
      return std::make_unique<Lrn>(s.lrn_size, s.alpha, s.beta, s.k);
    case LayerSpec::Kind::kFlatten:
      return std::make_unique<Flatten>();
  }
  return nullptr;
}

}  // namespace dltune::engine
