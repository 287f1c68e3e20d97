// Shared pieces of the GPU engine tests: the skip rule, one GpuContext per test program, device
// buffers filled from host vectors, and a relative-error measure.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gpu/gpu_context.h"

namespace dltune::engine::gpu::testing {

// The process-wide context, or nullptr with `reason` set when there is no usable GPU.
inline GpuContext* context_or_reason(std::string& reason) {
  static std::unique_ptr<GpuContext> ctx;
  static std::string why;
  static bool tried = false;
  if (!tried) {
    tried = true;
    auto c = GpuContext::create(0);
    if (c)
      ctx = std::move(*c);
    else
      why = c.error().message();
  }
  reason = why;
  return ctx.get();
}

// Skips the current test (GTEST_SKIP, so ctest reports it skipped) when there is no GPU.
#define DLTUNE_GPU_OR_SKIP(ctx_var)                                      \
  std::string dltune_skip_reason_;                                       \
  GpuContext* ctx_var = testing::context_or_reason(dltune_skip_reason_); \
  if (!ctx_var) GTEST_SKIP() << "no GPU to test on: " << dltune_skip_reason_

inline DeviceBuffer upload(GpuContext& ctx, const std::vector<float>& host) {
  auto b = DeviceBuffer::alloc_floats(std::max<size_t>(host.size(), 1));
  EXPECT_TRUE(b.ok());
  ctx.to_device(b->data(), host.data(), host.size() * sizeof(float));
  EXPECT_TRUE(ctx.synchronize().ok());
  return std::move(*b);
}

inline std::vector<float> download(GpuContext& ctx, const float* dev, size_t n) {
  std::vector<float> host(n);
  ctx.to_host(host.data(), dev, n * sizeof(float));
  auto st = ctx.synchronize();
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message());
  return host;
}

// max |a - b| / max |b| (norm-wise relative error; 0 for two zero vectors).
inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(double{a[i]} - b[i]));
    scale = std::max(scale, std::abs(double{b[i]}));
  }
  return scale > 0.0 ? diff / scale : diff;
}

}  // namespace dltune::engine::gpu::testing
