// Making OpenBLAS run the kernels of this CPU's instruction set.
//
// OpenBLAS as Debian 12 builds it (0.3.21, DYNAMIC_ARCH) picks its kernels by the CPU's model
// number when the library loads. A model newer than its table falls back to Prescott's SSE3
// kernels: on these VMs' Emerald Rapids (family 6, model 207), sgemm ran at 32 GFLOP/s instead of
// 150 with the AVX-512 kernels, and the engine's ResNet-20 at 63 instead of 164 samples/s. The
// library reads OPENBLAS_CORETYPE only while it loads, so a process that finds itself on the
// fallback sets the variable and executes itself again.
#pragma once

#include <string>

namespace dltune::engine {

// The kernel set OpenBLAS should use on this CPU from its instruction set: "SkylakeX"
// (AVX-512 F, BW, VL, DQ, CD), "Haswell" (AVX2 and FMA), or "" (nothing better to ask for).
std::string native_blas_coretype();

// The kernel set OpenBLAS chose when it loaded ("Prescott", "SkylakeX", ...).
std::string blas_coretype();

// True when `chosen` (an OpenBLAS core name) is a pre-AVX2 kernel set while `native` names a
// better one: the library fell back.
bool blas_fell_back(const std::string& chosen, const std::string& native);

// Call first in main(), before any thread starts. When the BLAS library fell back
// (blas_fell_back()) and OPENBLAS_CORETYPE is not set, sets it to native_blas_coretype() and
// re-executes this program (/proc/self/exe, the same argv and environment, the same pid, so a
// rank keeps its identity); returns only when nothing was to be done, or when the exec failed
// (then a warning says so and the process goes on with the slow kernels). A
// OPENBLAS_CORETYPE the user set is left alone.
void use_native_blas_kernels(char** argv);

}  // namespace dltune::engine
