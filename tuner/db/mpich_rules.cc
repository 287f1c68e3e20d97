// Plan collectives -> MPICH 4.x collective selection JSON (runtime_formats.h).
#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "tuner/db/runtime_formats.h"

namespace dltune::tuner::db {
namespace {

using Json = nlohmann::ordered_json;  // MPICH tries the keys in file order

Json leaf(const std::string& algorithm) { return Json{{"algorithm=" + algorithm, Json::object()}}; }

// Every collective MPICH 4.0 selects for, with one general algorithm for intra- and (when MPI
// has them) inter-communicators; "" = the collective takes no communicator type. For the
// all-to-all family an in-place send buffer needs its own algorithm.
struct Fallback {
  const char* collective;
  const char* intra;
  const char* inter;          // nullptr: no comm_type level
  const char* intra_inplace;  // nullptr: the send buffer does not matter
};
constexpr Fallback kFallbacks[] = {
    {"bcast", "MPIR_Bcast_intra_binomial", "MPIR_Bcast_inter_remote_send_local_bcast", nullptr},
    {"barrier", "MPIR_Barrier_intra_dissemination", "MPIR_Barrier_inter_bcast", nullptr},
    {"allreduce", "MPIR_Allreduce_intra_recursive_doubling",
     "MPIR_Allreduce_inter_reduce_exchange_bcast", nullptr},
    {"allgather", "MPIR_Allgather_intra_ring", "MPIR_Allgather_inter_local_gather_remote_bcast",
     nullptr},
    {"allgatherv", "MPIR_Allgatherv_intra_ring", "MPIR_Allgatherv_inter_remote_gather_local_bcast",
     nullptr},
    {"reduce", "MPIR_Reduce_intra_binomial", "MPIR_Reduce_inter_local_reduce_remote_send", nullptr},
    {"reduce_scatter", "MPIR_Reduce_scatter_intra_recursive_doubling",
     "MPIR_Reduce_scatter_inter_remote_reduce_local_scatter", nullptr},
    {"reduce_scatter_block", "MPIR_Reduce_scatter_block_intra_recursive_doubling",
     "MPIR_Reduce_scatter_block_inter_remote_reduce_local_scatter", nullptr},
    {"gather", "MPIR_Gather_intra_binomial", "MPIR_Gather_inter_linear", nullptr},
    {"scatter", "MPIR_Scatter_intra_binomial", "MPIR_Scatter_inter_linear", nullptr},
    {"gatherv", "MPIR_Gatherv_allcomm_linear", nullptr, nullptr},
    {"scatterv", "MPIR_Scatterv_allcomm_linear", nullptr, nullptr},
    {"scan", "MPIR_Scan_intra_recursive_doubling", nullptr, nullptr},
    {"exscan", "MPIR_Exscan_intra_recursive_doubling", nullptr, nullptr},
    {"alltoall", "MPIR_Alltoall_intra_pairwise", "MPIR_Alltoall_inter_pairwise_exchange",
     "MPIR_Alltoall_intra_pairwise_sendrecv_replace"},
    {"alltoallv", "MPIR_Alltoallv_intra_scattered", "MPIR_Alltoallv_inter_pairwise_exchange",
     "MPIR_Alltoallv_intra_pairwise_sendrecv_replace"},
    {"alltoallw", "MPIR_Alltoallw_intra_scattered", "MPIR_Alltoallw_inter_pairwise_exchange",
     "MPIR_Alltoallw_intra_pairwise_sendrecv_replace"},
    {"neighbor_allgather", "MPIR_Neighbor_allgather_allcomm_nb", nullptr, nullptr},
    {"neighbor_allgatherv", "MPIR_Neighbor_allgatherv_allcomm_nb", nullptr, nullptr},
    {"neighbor_alltoall", "MPIR_Neighbor_alltoall_allcomm_nb", nullptr, nullptr},
    {"neighbor_alltoallv", "MPIR_Neighbor_alltoallv_allcomm_nb", nullptr, nullptr},
    {"neighbor_alltoallw", "MPIR_Neighbor_alltoallw_allcomm_nb", nullptr, nullptr},
    {"ibarrier", "MPIR_Ibarrier_intra_sched_recursive_doubling", "MPIR_Ibarrier_inter_sched_bcast",
     nullptr},
    {"iallreduce", "MPIR_Iallreduce_intra_sched_recursive_doubling",
     "MPIR_Iallreduce_inter_sched_remote_reduce_local_bcast", nullptr},
    {"iallgather", "MPIR_Iallgather_intra_sched_ring",
     "MPIR_Iallgather_inter_sched_local_gather_remote_bcast", nullptr},
    {"iallgatherv", "MPIR_Iallgatherv_intra_sched_ring",
     "MPIR_Iallgatherv_inter_sched_remote_gather_local_bcast", nullptr},
    {"ibcast", "MPIR_Ibcast_intra_sched_binomial", "MPIR_Ibcast_inter_sched_flat", nullptr},
    {"ireduce", "MPIR_Ireduce_intra_sched_binomial",
     "MPIR_Ireduce_inter_sched_local_reduce_remote_send", nullptr},
    {"ireduce_scatter", "MPIR_Ireduce_scatter_intra_sched_recursive_doubling",
     "MPIR_Ireduce_scatter_inter_sched_remote_reduce_local_scatterv", nullptr},
    {"ireduce_scatter_block", "MPIR_Ireduce_scatter_block_intra_sched_recursive_doubling",
     "MPIR_Ireduce_scatter_block_inter_sched_remote_reduce_local_scatterv", nullptr},
    {"igather", "MPIR_Igather_intra_sched_binomial", "MPIR_Igather_inter_sched_long", nullptr},
    {"iscatter", "MPIR_Iscatter_intra_sched_binomial", "MPIR_Iscatter_inter_sched_linear", nullptr},
    {"igatherv", "MPIR_Igatherv_allcomm_sched_linear", nullptr, nullptr},
    {"iscatterv", "MPIR_Iscatterv_allcomm_sched_linear", nullptr, nullptr},
    {"iscan", "MPIR_Iscan_intra_sched_recursive_doubling", nullptr, nullptr},
    {"iexscan", "MPIR_Iexscan_intra_sched_recursive_doubling", nullptr, nullptr},
    {"ialltoall", "MPIR_Ialltoall_intra_sched_pairwise",
     "MPIR_Ialltoall_inter_sched_pairwise_exchange", "MPIR_Ialltoall_intra_sched_inplace"},
    {"ialltoallv", "MPIR_Ialltoallv_intra_sched_blocked",
     "MPIR_Ialltoallv_inter_sched_pairwise_exchange", "MPIR_Ialltoallv_intra_sched_inplace"},
    {"ialltoallw", "MPIR_Ialltoallw_intra_sched_blocked",
     "MPIR_Ialltoallw_inter_sched_pairwise_exchange", "MPIR_Ialltoallw_intra_sched_inplace"},
    {"ineighbor_allgather", "MPIR_Ineighbor_allgather_allcomm_sched_linear", nullptr, nullptr},
    {"ineighbor_allgatherv", "MPIR_Ineighbor_allgatherv_allcomm_sched_linear", nullptr, nullptr},
    {"ineighbor_alltoall", "MPIR_Ineighbor_alltoall_allcomm_sched_linear", nullptr, nullptr},
    {"ineighbor_alltoallv", "MPIR_Ineighbor_alltoallv_allcomm_sched_linear", nullptr, nullptr},
    {"ineighbor_alltoallw", "MPIR_Ineighbor_alltoallw_allcomm_sched_linear", nullptr, nullptr},
};

Json intra_fallback(const Fallback& f) {
  if (f.intra_inplace == nullptr) return leaf(f.intra);
  return Json{{"is_sendbuf_inplace=yes", leaf(f.intra_inplace)},
              {"is_sendbuf_inplace=no", leaf(f.intra)}};
}

Json fallback_entry(const Fallback& f, const Json& intra) {
  if (f.inter == nullptr) return intra;
  return Json{{"comm_type=intra", intra}, {"comm_type=inter", leaf(f.inter)}};
}

// The MPICH choice for one range of a planned collective (allreduce, bcast, allgather), with
// the guards its algorithm needs; "" note when the mapping is exact.
struct Choice {
  Json node;
  std::string note;
};

const Json kAllreduceRd = leaf("MPIR_Allreduce_intra_recursive_doubling");

// reduce_scatter_allgather needs a built-in op and at least a power of two of elements (MPICH's
// own table guards it the same way).
Json allreduce_rsag() {
  return Json{{"is_op_built_in=yes",
               Json{{"count<pow2", kAllreduceRd},
                    {"count=any", leaf("MPIR_Allreduce_intra_reduce_scatter_allgather")}}},
              {"is_op_built_in=no", kAllreduceRd}};
}

// The node-aware algorithms need a communicator with a node hierarchy (and allreduce's a
// commutative op).
Json smp(const std::string& algorithm, const Json& otherwise, bool needs_commutative) {
  Json inner = leaf(algorithm);
  if (needs_commutative)
    inner = Json{{"is_commutative=yes", inner}, {"is_commutative=no", otherwise}};
  return Json{{"comm_hierarchy=parent", inner}, {"comm_hierarchy=any", otherwise}};
}

Json pow2_only(const std::string& algorithm, const Json& otherwise) {
  return Json{{"comm_size=pow2", leaf(algorithm)}, {"comm_size=any", otherwise}};
}

Result<Choice> map_range(const std::string& coll, const std::string& algo) {
  const std::string closest = " has no MPICH 4.0 equivalent; using ";
  if (coll == "allreduce") {
    if (algo == "rd") return Choice{kAllreduceRd, ""};
    if (algo == "rabenseifner") return Choice{allreduce_rsag(), ""};
    if (algo == "ring")
      return Choice{allreduce_rsag(),
                    "ring" + closest + "reduce_scatter_allgather (the same bytes moved)"};
    if (algo == "tree") return Choice{kAllreduceRd, "tree" + closest + "recursive_doubling"};
    if (algo == "cma")
      return Choice{allreduce_rsag(),
                    "cma" + closest + "reduce_scatter_allgather (the same pattern)"};
    if (algo == "hier" || algo == "shm") {
      return Choice{
          smp("MPIR_Allreduce_intra_smp", kAllreduceRd, true),
          algo == "hier" ? "" : "shm" + closest + "smp (node-aware, shared memory within a node)"};
    }
    if (algo == "native") {
      return Choice{allreduce_rsag(),
                    "native (the MPI's own choice) cannot be kept in a file that "
                    "replaces MPICH's table; using reduce_scatter_allgather"};
    }
  } else if (coll == "broadcast" || coll == "bcast") {
    const Json binomial = leaf("MPIR_Bcast_intra_binomial");
    const Json ring = leaf("MPIR_Bcast_intra_scatter_ring_allgather");
    if (algo == "tree" || algo == "rd") return Choice{binomial, ""};
    if (algo == "ring") return Choice{ring, ""};
    if (algo == "rabenseifner") {
      return Choice{pow2_only("MPIR_Bcast_intra_scatter_recursive_doubling_allgather", ring), ""};
    }
    if (algo == "hier" || algo == "shm")
      return Choice{smp("MPIR_Bcast_intra_smp", binomial, false), ""};
    if (algo == "native") return Choice{binomial, "native cannot be kept; using binomial"};
  } else if (coll == "allgather") {
    const Json ring = leaf("MPIR_Allgather_intra_ring");
    if (algo == "ring") return Choice{ring, ""};
    if (algo == "rd") return Choice{pow2_only("MPIR_Allgather_intra_recursive_doubling", ring), ""};
    if (algo == "tree")
      return Choice{leaf("MPIR_Allgather_intra_brucks"), "tree" + closest + "brucks"};
    if (algo == "hier" || algo == "shm" || algo == "native") {
      return Choice{ring, algo + closest + "ring"};
    }
  }
  return invalid_input("no MPICH mapping for " + coll + " algorithm '" + algo.substr(0, 32) + "'");
}

void add_note(std::vector<std::string>* notes, const std::string& n) {
  if (!n.empty() && std::find(notes->begin(), notes->end(), n) == notes->end()) notes->push_back(n);
}

// One plan's ranges of `coll` as a message-size level ("avg_msg_size<N" ... "=any").
Result<Json> size_level(const std::string& coll, const std::vector<CollectiveRange>& ranges,
                        std::vector<std::string>* notes) {
  const std::string key = coll == "allgather" ? "total_msg_size" : "avg_msg_size";
  Json level = Json::object();
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto c = map_range(coll, ranges[i].algo);
    if (!c) return std::move(c).error();
    if (!c->note.empty()) add_note(notes, coll + ": " + c->note);
    const bool last = i + 1 == ranges.size();
    // Adjacent ranges with the same choice are one condition.
    if (!last) {
      auto next = map_range(coll, ranges[i + 1].algo);
      if (next && next->node == c->node) continue;
    }
    level[last ? key + "=any" : key + "<" + std::to_string(ranges[i].max_bytes)] = c->node;
  }
  return level;
}

}  // namespace

Result<std::string> mpich_rules_json(const std::map<int, PlanCollectives>& plans,
                                     std::vector<std::string>* notes) {
  if (plans.empty()) return invalid_input("no plan to export");
  // collective -> (comm size -> its message-size level)
  std::map<std::string, std::map<int, Json>> planned;
  for (const auto& [size, plan] : plans) {
    for (const auto& [name, ranges] : plan) {
      const std::string coll = name == "broadcast" ? "bcast" : name;
      if (coll != "allreduce" && coll != "bcast" && coll != "allgather") {
        add_note(notes, name + ": not exported to MPICH (allreduce, broadcast and allgather are)");
        continue;
      }
      auto level = size_level(name, ranges, notes);
      if (!level) return std::move(level).error().wrap("plan.collectives." + name);
      planned[coll][size] = std::move(*level);
    }
  }
  if (planned.count("allgather") > 0) {
    add_note(notes, "allgather: the plan's sizes are matched against MPICH's total_msg_size");
  }
  add_note(notes,
           "MPICH replaces its whole selection table with this file: collectives the plan does "
           "not set use one general algorithm each");
  Json root = Json::object();
  for (const Fallback& f : kFallbacks) {
    const auto it = planned.find(f.collective);
    if (it == planned.end()) {
      root["collective=" + std::string(f.collective)] = fallback_entry(f, intra_fallback(f));
      continue;
    }
    // comm_size<next ... comm_size=any, each with the plan of the largest size below it.
    Json by_size = Json::object();
    for (auto s = it->second.begin(); s != it->second.end(); ++s) {
      const auto next = std::next(s);
      by_size[next == it->second.end() ? std::string("comm_size=any")
                                       : "comm_size<" + std::to_string(next->first)] = s->second;
    }
    root["collective=" + std::string(f.collective)] = fallback_entry(f, by_size);
  }
  return root.dump(2) + "\n";
}

}  // namespace dltune::tuner::db
