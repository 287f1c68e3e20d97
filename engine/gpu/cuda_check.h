// Internal to the CUDA build of engine/gpu: turning CUDA, cuBLAS and cuDNN status codes into
// dltune errors. Included only by files compiled when DLTUNE_HAVE_CUDA.
#pragma once

#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "common/result.h"
#include "engine/gpu/gpu_context.h"

namespace dltune::engine::gpu {

inline Error cuda_error(cudaError_t e, const std::string& what) {
  return internal_error(what + ": " + cudaGetErrorString(e));
}
inline Error cublas_error(cublasStatus_t s, const std::string& what) {
  return internal_error(what + ": cuBLAS " + cublasGetStatusString(s));
}
inline Error cudnn_error(cudnnStatus_t s, const std::string& what) {
  return internal_error(what + ": cuDNN " + cudnnGetErrorString(s));
}

// Each records a failure in the context and returns false; true on success.
inline bool cuda_ok(GpuContext& ctx, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  ctx.fail(cuda_error(e, what));
  return false;
}
inline bool cublas_ok(GpuContext& ctx, cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  ctx.fail(cublas_error(s, what));
  return false;
}
inline bool cudnn_ok(GpuContext& ctx, cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return true;
  ctx.fail(cudnn_error(s, what));
  return false;
}

inline cudaStream_t stream_of(const GpuContext& ctx) {
  return static_cast<cudaStream_t>(ctx.stream());
}
inline cublasHandle_t cublas_of(const GpuContext& ctx) {
  return static_cast<cublasHandle_t>(ctx.cublas());
}
inline cudnnHandle_t cudnn_of(const GpuContext& ctx) {
  return static_cast<cudnnHandle_t>(ctx.cudnn());
}

}  // namespace dltune::engine::gpu
