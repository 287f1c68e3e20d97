#include "recipes/enums.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

namespace dltune::recipes {
namespace {

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
  // kMinLrReferenceBatch (plan.h): a plan never scales lr beyond global / 2.
  const double cap = std::max(1.0, static_cast<double>(global) / 2.0);
  return std::min(cap, s == LrScaling::kSqrt ? std::sqrt(ratio) : ratio);
}

}  // namespace dltune::recipes
