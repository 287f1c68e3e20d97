#include "common/env.h"

#include <array>
#include <cstdlib>
#include <sstream>

namespace dltune::env {
namespace {
constexpr std::array kAll{kDebug,         kDebugSubsys,    kDb,
                          kSiteDb,        kTrustedKeys,    kPlan,
                          kRecipe,        kRunsDir,        kTopoXml,
                          kTopoCache,     kBind,           kBackend,
                          kKillGrace,     kNoColor,        kCommTimeout,
                          kNodeAnswer,    kCommCma,        kFaultTrialStep,
                          kLoaderThreads, kLoaderPrefetch, kUpdateGolden,
                          kCpuMask,       kKernels,        kFaultCheckpointStall};
}  // namespace

std::span<const EnvVar> all() { return kAll; }

std::optional<std::string> get_if_set(const EnvVar& var) {
  const char* v = std::getenv(std::string(var.name).c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::string get(const EnvVar& var) {
  auto v = get_if_set(var);
  return v ? *v : std::string(var.default_value);
}

std::string describe_all() {
  std::ostringstream os;
  for (const EnvVar& v : kAll) {
    os << "  " << v.name;
    if (!v.default_value.empty()) os << " (default: " << v.default_value << ")";
    os << "\n      " << v.doc << "\n";
  }
  return os.str();
}

}  // namespace dltune::env
