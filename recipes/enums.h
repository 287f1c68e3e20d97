// Names shared by the Recipe and the Plan: collective algorithms (common/collectives.h),
// collectives, scaling modes.
//
// Each enum has a stable lower-case spelling (the one recipes, plans, the database and
// `dltune bench --json` use); *_name() gives it and parse_*() reads it back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/collectives.h"

namespace dltune::recipes {

// A collective algorithm (and NCCL's protocol): the one vocabulary of common/collectives.h.
using dltune::Algorithm;
using dltune::algorithm_name;
using dltune::algorithm_names;
using dltune::choice_name;
using dltune::is_nccl;
using dltune::NcclProtocol;
using dltune::parse_algorithm;
using dltune::parse_choice;

enum class Collective { kAllreduce, kBroadcast, kAllgather, kReduceScatter };

// How the global batch follows the rank count: strong keeps the global batch fixed (per-rank
// batch shrinks with more ranks), weak keeps the per-rank batch fixed (global grows).
enum class Scaling { kAuto, kStrong, kWeak };

std::string_view collective_name(Collective c);  // "allreduce", "broadcast", ...
std::optional<Collective> parse_collective(std::string_view s);
std::vector<std::string> collective_names();

std::string_view scaling_name(Scaling s);  // "auto", "strong", "weak"
std::optional<Scaling> parse_scaling(std::string_view s);

// How the learning rate follows the global batch G against the recipe's reference batch R:
// linear multiplies it by G / R (Goyal et al.), sqrt by sqrt(G / R) (Krizhevsky's "one weird
// trick", Hoffer et al.), none keeps it; auto is linear, with sqrt and then none as the
// tuner's fallbacks when every candidate diverges.
enum class LrScaling { kAuto, kLinear, kSqrt, kNone };

std::string_view lr_scaling_name(LrScaling s);  // "auto", "linear", "sqrt", "none"
std::optional<LrScaling> parse_lr_scaling(std::string_view s);
// The factor rule `s` (auto: linear) gives lr at global batch `global` for reference `reference`,
// never more than max(1, global / 2): a reference batch below 2 samples (lr_reference_batch 1,
// or a per-rank batch of 1 scaled to many ranks) counts as 2, so that every factor the rule
// gives passes check_plan_plausible (plan.h, kMinLrReferenceBatch).
double lr_scale_for(LrScaling s, int64_t global, int64_t reference);

// The longest tuning budget a recipe (tune.budget) or the command line (--budget) may give: 11.6
// days, far beyond any sensible tuning and far below what overflows a deadline.
inline constexpr double kMaxTuneBudgetSeconds = 1e6;

}  // namespace dltune::recipes
