// Plan collectives -> MVAPICH2 2.3 tuning strings (runtime_formats.h).
#include <algorithm>
#include <string>

#include "tuner/db/runtime_formats.h"

namespace dltune::tuner::db {
namespace {

// MVAPICH2 2.3's inter-node allreduce algorithms its user string accepts (allreduce_tuning.c):
// 1 = MPIR_Allreduce_pt2pt_rd_MV2, 2 = MPIR_Allreduce_pt2pt_rs_MV2.
constexpr int kRd = 1;
constexpr int kReduceScatterAllgather = 2;

Result<int> mvapich_allreduce(const std::string& algo, std::string* note) {
  if (algo == "rd") return kRd;
  if (algo == "rabenseifner") return kReduceScatterAllgather;
  if (algo == "ring" || algo == "hier" || algo == "cma") {
    *note = algo + " has no MVAPICH2 string equivalent; using 2 (reduce-scatter + allgather)";
    return kReduceScatterAllgather;
  }
  if (algo == "tree" || algo == "shm" || algo == "native") {
    *note = algo + " has no MVAPICH2 string equivalent; using 1 (recursive doubling)";
    return kRd;
  }
  return invalid_input("no MVAPICH2 mapping for allreduce algorithm '" + algo.substr(0, 32) + "'");
}

}  // namespace

Result<std::string> mvapich_tuning_env(const PlanCollectives& plan,
                                       std::vector<std::string>* notes) {
  for (const auto& [name, ranges] : plan) {
    if (name != "allreduce") {
      notes->push_back(name + ": not exported to MVAPICH2 (only allreduce's string is)");
    }
  }
  const auto it = plan.find("allreduce");
  if (it == plan.end()) return invalid_input("the plan sets no allreduce, the one MVAPICH2 string");
  struct Item {
    int algo;
    uint64_t min, max;  // max inclusive; UINT64_MAX = '+'
  };
  std::vector<Item> items;
  for (const CollectiveRange& r : it->second) {
    std::string note;
    auto a = mvapich_allreduce(r.algo, &note);
    if (!a) return std::move(a).error().wrap("plan.collectives.allreduce");
    if (!note.empty() &&
        std::find(notes->begin(), notes->end(), "allreduce: " + note) == notes->end()) {
      notes->push_back("allreduce: " + note);
    }
    const uint64_t max = r.max_bytes == UINT64_MAX ? UINT64_MAX : r.max_bytes - 1;
    if (!items.empty() && items.back().algo == *a) {
      items.back().max = max;
    } else {
      items.push_back({*a, r.min_bytes, max});
    }
  }
  items.back().max = UINT64_MAX;  // MVAPICH2 needs the last range open-ended
  std::string value;
  for (const Item& i : items) {
    value += (value.empty() ? "" : ",") + std::to_string(i.algo) + ":" + std::to_string(i.min) +
             "-" + (i.max == UINT64_MAX ? std::string("+") : std::to_string(i.max));
  }
  std::string out = "# MVAPICH2 2.3 collective tuning from a dltune plan: source these lines\n";
  out += "# (ALGO:MIN-MAX byte ranges; 1 = recursive doubling, 2 = reduce-scatter + allgather).\n";
  out += "export MV2_USE_INDEXED_TUNING='0'\n";
  out += "export MV2_USE_INDEXED_ALLREDUCE_TUNING='0'\n";
  out += "export MV2_INTER_ALLREDUCE_TUNING='" + value + "'\n";
  return out;
}

}  // namespace dltune::tuner::db
