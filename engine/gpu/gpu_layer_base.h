// Internal to the CUDA build of engine/gpu: the common base of the GPU layers. A GPU layer keeps
// its CPU twin for everything that is not compute (shape validation, parameter count and
// initialisation), so both always agree.
#pragma once

#include <memory>
#include <vector>

#include "engine/gpu/cuda_check.h"
#include "engine/gpu/gpu_context.h"
#include "engine/layer.h"

namespace dltune::engine::gpu {

class GpuLayer : public Layer {
 public:
  GpuLayer(const LayerSpec& spec, GpuContext& ctx)
      : spec_(spec), cpu_(make_layer(spec)), ctx_(ctx) {}
  const char* kind() const override { return cpu_->kind(); }
  Result<Dims> setup(const Dims& in) override {
    auto out = cpu_->setup(in);
    if (!out) return out.error();
    in_ = in;
    out_ = *out;
    return out_;
  }
  int64_t num_params() const override { return cpu_->num_params(); }
  // The CPU twin draws the values on the host; they are copied to the bound device slice.
  void init_params(Rng& rng) override {
    if (num_params() == 0) return;
    std::vector<float> host(static_cast<size_t>(num_params()));
    cpu_->bind(host.data(), nullptr);
    cpu_->init_params(rng);
    ctx_.to_device(params_, host.data(), host.size() * sizeof(float));
    // `host` dies here; an error stays recorded for the caller's next take_status().
    cuda_ok(ctx_, cudaStreamSynchronize(stream()), "initialising parameters");
  }

 protected:
  cudaStream_t stream() const { return stream_of(ctx_); }
  // A device buffer of at least `bytes` in `buf`; records an error and returns false if not.
  bool ensure(DeviceBuffer& buf, size_t bytes, const char* what) {
    if (buf.bytes() >= bytes) return true;
    buf = DeviceBuffer();
    auto b = DeviceBuffer::alloc(bytes);
    if (!b) {
      ctx_.fail(b.error().wrap(std::string(kind()) + ": allocating the " + what));
      return false;
    }
    buf = std::move(*b);
    return true;
  }

  LayerSpec spec_;
  std::unique_ptr<Layer> cpu_;
  GpuContext& ctx_;
};

// conv2d on cuDNN (gpu_conv.cc).
std::unique_ptr<Layer> make_gpu_conv2d(const LayerSpec& spec, GpuContext& ctx);

}  // namespace dltune::engine::gpu
