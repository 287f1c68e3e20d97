// Names shared by the Recipe and the Plan: collective algorithms, collectives, scaling modes.
//
// Each enum has a stable lower-case spelling (the one recipes, plans, the database and
// `dltune bench --json` use); *_name() gives it and parse_*() reads it back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dltune::recipes {

// A collective algorithm (DESIGN.md, comm/): the spelling is what plans and benches print.
enum class Algorithm {
  kRing,               // "ring": Baidu-style ring (reduce-scatter + allgather on a ring)
  kRecursiveDoubling,  // "rd"
  kRabenseifner,       // "rabenseifner": recursive-halving reduce-scatter + allgather
  kTree,               // "tree": binomial tree reduce + broadcast
  kHierarchical,       // "hier": node-local, then cross-node, then node-local
  kSharedMemory,       // "shm": node-local shared-memory reduction
  kCrossMemory,        // "cma": node-local single-copy reduction on the ranks' own buffers
  kNative,             // "native": MPI_Allreduce / the transport's own
  kNcclRing,           // "nccl_ring" (GPU path)
  kNcclTree,           // "nccl_tree" (GPU path)
};

enum class Collective { kAllreduce, kBroadcast, kAllgather, kReduceScatter };

// How the global batch follows the rank count: strong keeps the global batch fixed (per-rank
// batch shrinks with more ranks), weak keeps the per-rank batch fixed (global grows).
enum class Scaling { kAuto, kStrong, kWeak };

std::string_view algorithm_name(Algorithm a);
// Returns nullopt for anything not spelled exactly as algorithm_name() prints it.
std::optional<Algorithm> parse_algorithm(std::string_view s);
// Every algorithm name, in enum order (for "allowed: ..." messages).
std::vector<std::string> algorithm_names();

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
// The factor rule `s` (auto: linear) gives lr at global batch `global` for reference `reference`.
double lr_scale_for(LrScaling s, int64_t global, int64_t reference);

}  // namespace dltune::recipes
