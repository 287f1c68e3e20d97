#include "engine/ops/library_threads.h"

#include <mutex>

#include "common/log.h"
#include "engine/core/cpu_features.h"
#include "engine/core/tensor.h"
#include "engine/ops/onednn.h"

namespace dltune::engine {

void use_engine_threads_for_libraries() {
  if (blas_threads() != 1) set_blas_threads(1);
  onednn_use_one_thread();
  // oneDNN's process-wide state (its engine, CPU dispatch, the primitive-descriptor machinery,
  // about 2-3 MiB) is set up by the first question asked of it: ask one now, so that it is
  // part of what the process holds before a model is built, not of a training's memory.
  static std::once_flag once;
  std::call_once(once, [] {
    (void)onednn_conv_supported(OnednnConvShape{8, 8, 8, 8, 8, 8, 3, 1, 1, 1, false},
                                Precision::kFp32);
  });
}

void log_bf16_path_once() {
  static std::once_flag once;
  std::call_once(
      once, [] {
        const CpuFeatures& f = cpu_features();
        if (f.bf16_hardware()) {
          DLTUNE_LOG(kInfo, "engine")
              << "bf16: this CPU has " << (f.amx_bf16 ? "AMX-BF16" : "AVX512-BF16")
              << "; convolutions and products may run oneDNN's bf16 kernels";
        } else {
          DLTUNE_LOG(kInfo, "engine")
              << "bf16: this CPU (" << f.describe()
              << ") has no bf16 instructions: bf16 runs the engine's fallback (inputs rounded to "
                 "bf16, fp32 multiply-adds: the same numbers, no speed-up)";
        }
      });
}

}  // namespace dltune::engine
