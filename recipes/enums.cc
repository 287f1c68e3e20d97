#include "recipes/enums.h"

#include <array>
#include <cmath>
#include <utility>

namespace dltune::recipes {
namespace {

constexpr std::array<std::pair<Algorithm, std::string_view>, 10> kAlgorithms{{
    {Algorithm::kRing, "ring"},
    {Algorithm::kRecursiveDoubling, "rd"},
    {Algorithm::kRabenseifner, "rabenseifner"},
    {Algorithm::kTree, "tree"},
    {Algorithm::kHierarchical, "hier"},
    {Algorithm::kSharedMemory, "shm"},
    {Algorithm::kCrossMemory, "cma"},
    {Algorithm::kNative, "native"},
    {Algorithm::kNcclRing, "nccl_ring"},
    {Algorithm::kNcclTree, "nccl_tree"},
}};

constexpr std::array<std::pair<Collective, std::string_view>, 4> kCollectives{{
    {Collective::kAllreduce, "allreduce"},
    {Collective::kBroadcast, "broadcast"},
    {Collective::kAllgather, "allgather"},
    {Collective::kReduceScatter, "reduce_scatter"},
}};

constexpr std::array<std::pair<Scaling, std::string_view>, 3> kScalings{{
    {Scaling::kAuto, "auto"},
    {Scaling::kStrong, "strong"},
    {Scaling::kWeak, "weak"},
}};

constexpr std::array<std::pair<LrScaling, std::string_view>, 4> kLrScalings{{
    {LrScaling::kAuto, "auto"},
    {LrScaling::kLinear, "linear"},
    {LrScaling::kSqrt, "sqrt"},
    {LrScaling::kNone, "none"},
}};

template <typename E, size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [value, name] : table)
    if (value == e) return name;
  return "?";
}

template <typename E, size_t N>
std::optional<E> value_of(const std::array<std::pair<E, std::string_view>, N>& table,
                          std::string_view s) {
  for (const auto& [value, name] : table)
    if (name == s) return value;
  return std::nullopt;
}

template <typename E, size_t N>
std::vector<std::string> names_of(const std::array<std::pair<E, std::string_view>, N>& table) {
  std::vector<std::string> out;
  for (const auto& entry : table) out.emplace_back(entry.second);
  return out;
}

}  // namespace

std::string_view algorithm_name(Algorithm a) { return name_of(kAlgorithms, a); }
std::optional<Algorithm> parse_algorithm(std::string_view s) { return value_of(kAlgorithms, s); }
std::vector<std::string> algorithm_names() { return names_of(kAlgorithms); }

std::string_view collective_name(Collective c) { return name_of(kCollectives, c); }
std::optional<Collective> parse_collective(std::string_view s) { return value_of(kCollectives, s); }
std::vector<std::string> collective_names() { return names_of(kCollectives); }

std::string_view scaling_name(Scaling s) { return name_of(kScalings, s); }
std::optional<Scaling> parse_scaling(std::string_view s) { return value_of(kScalings, s); }

std::string_view lr_scaling_name(LrScaling s) { return name_of(kLrScalings, s); }
std::optional<LrScaling> parse_lr_scaling(std::string_view s) { return value_of(kLrScalings, s); }

double lr_scale_for(LrScaling s, int64_t global, int64_t reference) {
  if (s == LrScaling::kNone || global <= 0 || reference <= 0) return 1.0;
  const double ratio = static_cast<double>(global) / static_cast<double>(reference);
  return s == LrScaling::kSqrt ? std::sqrt(ratio) : ratio;
}

}  // namespace dltune::recipes
