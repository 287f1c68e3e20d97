#include "engine/core/blas_kernels.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <cblas.h>
#include <unistd.h>

#include "common/log.h"

namespace dltune::engine {

std::string native_blas_coretype() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

std::string blas_coretype() {
  const char* name = openblas_get_corename();
  return name != nullptr ? std::string(name) : std::string();
}

bool blas_fell_back(const std::string& chosen, const std::string& native) {
  if (native.empty() || chosen.empty()) return false;
  std::string c = chosen;
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return std::tolower(ch); });
  // OpenBLAS's x86-64 core names whose kernels predate AVX2 (the targets DYNAMIC_ARCH falls
  // back to, and older ones).
  static const char* kOld[] = {"prescott", "core2",   "penryn",     "dunnington", "nehalem",
                               "atom",     "katmai",  "coppermine", "northwood",  "banias",
                               "athlon",   "opteron", "barcelona",  "bobcat",     "sandybridge",
                               "unknown",  "generic"};
  for (const char* o : kOld) {
    if (c == o) return true;
  }
  return false;
}

void use_native_blas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice stands
  const std::string chosen = blas_coretype(), native = native_blas_coretype();
  if (!blas_fell_back(chosen, native)) return;
  DLTUNE_LOG(kInfo, "engine") << "OpenBLAS chose its " << chosen
                              << " kernels on a CPU it does not know (newer than its table); "
                                 "restarting with OPENBLAS_CORETYPE="
                              << native << " for this CPU's instruction set";
  ::setenv("OPENBLAS_CORETYPE", native.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  DLTUNE_LOG(kWarn, "engine") << "could not restart with OPENBLAS_CORETYPE=" << native << " ("
                              << std::strerror(errno) << "): BLAS runs OpenBLAS's slower " << chosen
                              << " kernels; set OPENBLAS_CORETYPE=" << native
                              << " in the environment";
}

}  // namespace dltune::engine
