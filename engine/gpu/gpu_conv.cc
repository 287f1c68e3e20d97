// conv2d on cuDNN: cross-correlation with stride, zero padding and groups (the CPU engine's
// Conv2d semantics, engine/ops/conv2d.h), parameters W (OC, C/groups, K, K) then, with `bias`,
// b (OC). Gradients are written or added (cuDNN's beta 0 or 1).
//
// Math is plain FP32 (CUDNN_FMA_MATH, never TF32) so results match the CPU to float rounding.
// Algorithms: cuDNN's heuristics (Get*_v7) pick them once per batch size seen (training batch,
// evaluation batch, a last partial batch), taking the first FMA-math algorithm whose workspace
// fits kMaxWorkspaceBytes; the workspace is the context's shared scratch.
#include <algorithm>
#include <map>

#include "engine/gpu/gpu_op.h"

namespace dltune::engine::gpu {
namespace {

constexpr size_t kMaxWorkspaceBytes = size_t{1} << 30;

struct PerBatch {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t workspace = 0;
};

// Picks the first result that succeeded, uses FMA math and fits the workspace limit; falls back
// to the first successful one. Returns false when none succeeded.
template <typename Perf, typename Algo>
bool pick(const Perf* perf, int n, Algo& algo, size_t& bytes) {
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < n; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      if (pass == 0 && (perf[i].mathType != CUDNN_FMA_MATH || perf[i].memory > kMaxWorkspaceBytes))
        continue;
      algo = perf[i].algo;
      bytes = perf[i].memory;
      return true;
    }
  return false;
}

class GpuConv2d final : public GpuOp {
 public:
  using GpuOp::GpuOp;
  ~GpuConv2d() override {
    for (auto& [b, p] : per_batch_) {
      cudnnDestroyTensorDescriptor(p.x);
      cudnnDestroyTensorDescriptor(p.y);
    }
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
    if (filter_) cudnnDestroyFilterDescriptor(filter_);
    if (bias_) cudnnDestroyTensorDescriptor(bias_);
  }

  void reserve(int max_batch) override { (void)plan(max_batch); }

  void forward(const OpContext&, const float* const* inputs, float* out, int batch) override {
    // in (B, C, H, W) -> out (B, OC, OH, OW)
    const float* in = inputs[0];
    const PerBatch* p = plan(batch);
    if (!p) return;
    void* ws = ctx_.scratch(p->workspace);
    if (p->workspace > 0 && !ws) return;
    const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t h = cudnn_of(ctx_);
    if (!cudnn_ok(ctx_,
                  cudnnConvolutionForward(h, &one, p->x, in, filter_, params_[0], conv_, p->fwd, ws,
                                          p->workspace, &zero, p->y, out),
                  "conv2d forward"))
      return;
    if (attrs().bias)
      cudnn_ok(ctx_, cudnnAddTensor(h, &one, bias_, params_[1], &one, p->y, out), "conv2d bias");
  }

  void backward(const OpContext& ctx, const float* const* inputs, const float*, const float* dout,
                const GradOut* din, int batch) override {
    const float* in = inputs[0];
    const PerBatch* p = plan(batch);
    if (!p) return;
    void* ws = ctx_.scratch(p->workspace);
    if (p->workspace > 0 && !ws) return;
    const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t h = cudnn_of(ctx_);
    if (attrs().bias)
      cudnn_ok(ctx_,
               cudnnConvolutionBackwardBias(
                   h, &one, p->y, dout, accumulate_grad(ctx, 1) ? &one : &zero, bias_, grads_[1]),
               "conv2d backward (bias)");
    cudnn_ok(ctx_,
             cudnnConvolutionBackwardFilter(h, &one, p->x, in, p->y, dout, conv_, p->bwd_filter, ws,
                                            p->workspace, accumulate_grad(ctx, 0) ? &one : &zero,
                                            filter_, grads_[0]),
             "conv2d backward (weights)");
    if (din[0].data)
      cudnn_ok(ctx_,
               cudnnConvolutionBackwardData(h, &one, filter_, params_[0], p->y, dout, conv_,
                                            p->bwd_data, ws, p->workspace,
                                            din[0].accumulate ? &one : &zero, p->x, din[0].data),
               "conv2d backward (input)");
  }

 protected:
  Status configure() override {
    c_ = static_cast<int>(in_[0][0]);
    h_ = static_cast<int>(in_[0][1]);
    w_ = static_cast<int>(in_[0][2]);
    oc_ = static_cast<int>(out_[0]);
    oh_ = static_cast<int>(out_[1]);
    ow_ = static_cast<int>(out_[2]);
    const char* what = "conv2d: creating cuDNN descriptors";
    const int g = static_cast<int>(attrs().groups), k = static_cast<int>(attrs().kernel);
    const int pad = static_cast<int>(attrs().pad), stride = static_cast<int>(attrs().stride);
    if (cudnnStatus_t s = cudnnCreateFilterDescriptor(&filter_); s != CUDNN_STATUS_SUCCESS)
      return cudnn_error(s, what);
    if (cudnnStatus_t s = cudnnSetFilter4dDescriptor(filter_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                     oc_, c_ / g, k, k);
        s != CUDNN_STATUS_SUCCESS)
      return cudnn_error(s, what);
    if (cudnnStatus_t s = cudnnCreateConvolutionDescriptor(&conv_); s != CUDNN_STATUS_SUCCESS)
      return cudnn_error(s, what);
    if (cudnnStatus_t s = cudnnSetConvolution2dDescriptor(
            conv_, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
        s != CUDNN_STATUS_SUCCESS)
      return cudnn_error(s, what);
    if (cudnnStatus_t s = cudnnSetConvolutionGroupCount(conv_, g); s != CUDNN_STATUS_SUCCESS)
      return cudnn_error(s, what);
    if (cudnnStatus_t s = cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH);
        s != CUDNN_STATUS_SUCCESS)
      return cudnn_error(s, what);
    if (cudnnStatus_t s = cudnnCreateTensorDescriptor(&bias_); s != CUDNN_STATUS_SUCCESS)
      return cudnn_error(s, what);
    if (cudnnStatus_t s =
            cudnnSetTensor4dDescriptor(bias_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, oc_, 1, 1);
        s != CUDNN_STATUS_SUCCESS)
      return cudnn_error(s, what);
    return ok_status();
  }

 private:
  // The descriptors and algorithms for `batch`, created on first use; nullptr (error recorded)
  // when cuDNN fails.
  const PerBatch* plan(int batch) {
    if (auto it = per_batch_.find(batch); it != per_batch_.end()) return &it->second;
    PerBatch p;
    const char* what = "conv2d: choosing cuDNN algorithms";
    cudnnHandle_t h = cudnn_of(ctx_);
    bool ok = cudnn_ok(ctx_, cudnnCreateTensorDescriptor(&p.x), what) &&
              cudnn_ok(ctx_, cudnnCreateTensorDescriptor(&p.y), what) &&
              cudnn_ok(ctx_,
                       cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, batch,
                                                  c_, h_, w_),
                       what) &&
              cudnn_ok(ctx_,
                       cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, batch,
                                                  oc_, oh_, ow_),
                       what);
    constexpr int kMax = 16;
    int n = 0;
    size_t fwd_ws = 0, data_ws = 0, filter_ws = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[kMax];
    ok =
        ok &&
        cudnn_ok(ctx_,
                 cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, filter_, conv_, p.y, kMax, &n, fwd),
                 what) &&
        pick(fwd, n, p.fwd, fwd_ws);
    cudnnConvolutionBwdDataAlgoPerf_t data[kMax];
    ok = ok &&
         cudnn_ok(ctx_,
                  cudnnGetConvolutionBackwardDataAlgorithm_v7(h, filter_, p.y, conv_, p.x, kMax, &n,
                                                              data),
                  what) &&
         pick(data, n, p.bwd_data, data_ws);
    cudnnConvolutionBwdFilterAlgoPerf_t filter[kMax];
    ok = ok &&
         cudnn_ok(ctx_,
                  cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x, p.y, conv_, filter_, kMax,
                                                                &n, filter),
                  what) &&
         pick(filter, n, p.bwd_filter, filter_ws);
    if (!ok) {
      ctx_.fail(internal_error(std::string(what) + ": no usable algorithm for batch " +
                               std::to_string(batch)));
      if (p.x) cudnnDestroyTensorDescriptor(p.x);
      if (p.y) cudnnDestroyTensorDescriptor(p.y);
      return nullptr;
    }
    p.workspace = std::max({fwd_ws, data_ws, filter_ws});
    return &per_batch_.emplace(batch, p).first->second;
  }

  cudnnFilterDescriptor_t filter_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnTensorDescriptor_t bias_ = nullptr;
  std::map<int, PerBatch> per_batch_;
  int c_ = 0, h_ = 0, w_ = 0, oc_ = 0, oh_ = 0, ow_ = 0;
};

}  // namespace

std::unique_ptr<Op> make_gpu_conv2d(GpuContext& ctx) { return std::make_unique<GpuConv2d>(ctx); }

}  // namespace dltune::engine::gpu
