// The instruction-set features of the CPU the engine runs on, read once with cpuid (and the OS's
// XCR0 register for the vector state it saves), minus what DLTUNE_CPU_MASK masks out.
//
// DLTUNE_CPU_MASK (common/env.h) is a comma-separated list of: avx512 (also masks bf16 and
// amx: they need it), bf16 (AVX512-BF16), amx (AMX-BF16 and its tiles), avx2 (also masks FMA
// and everything above). A test simulates a CPU without bf16 instructions with
// DLTUNE_CPU_MASK=bf16,amx; the kernels, oneDNN's instruction set (dnnl::set_max_cpu_isa) and
// the bf16 fallback all follow the masked features. An unknown name is an error at first use
// (cpu_features_error()), and the mask is then ignored.
#pragma once

#include <string>

namespace dltune::engine {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512 = false;       // AVX-512 F, BW, VL and DQ (x86-64-v4) with the OS's zmm state
  bool avx512_bf16 = false;  // VCVTNE2PS2BF16, VDPBF16PS
  bool amx_bf16 = false;     // AMX tiles with bf16 (the OS's tile state)
  std::string masked;        // the DLTUNE_CPU_MASK names that took effect ("" when none)

  // Whether bf16 products run in bf16 hardware (AVX512-BF16 or AMX): else the engine's
  // documented fallback (bf16-rounded inputs, fp32 multiply-adds; engine/core/bf16.h).
  bool bf16_hardware() const { return avx512_bf16 || amx_bf16; }
  // "avx2 fma f16c avx512 ..." of what is on (for logs and the bench).
  std::string describe() const;
};

// The masked features of this CPU (read once; thread-safe).
const CpuFeatures& cpu_features();

// The features of this CPU before DLTUNE_CPU_MASK.
CpuFeatures cpu_features_unmasked();

// Applies a mask text ("bf16,amx") to `f`; returns "" or the error sentence for an unknown name.
std::string apply_cpu_mask(const std::string& mask, CpuFeatures* f);

// The error of DLTUNE_CPU_MASK ("" when it parsed): "DLTUNE_CPU_MASK: unknown feature 'x' ...".
const std::string& cpu_features_error();

}  // namespace dltune::engine
