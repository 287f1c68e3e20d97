#include "plugins/nccl_tuner/decision.h"

#include <limits>

#include "plugins/nccl_tuner/nccl_tuner_abi.h"

namespace dltune::plugins {
namespace {

// NCCL's id of an algorithm of the shared vocabulary; -1 for a host algorithm.
int nccl_algo(Algorithm a) {
  switch (a) {
    case Algorithm::kNcclTree:
      return kNcclAlgoTree;
    case Algorithm::kNcclRing:
      return kNcclAlgoRing;
    case Algorithm::kNcclCollnetDirect:
      return kNcclAlgoCollnetDirect;
    case Algorithm::kNcclCollnetChain:
      return kNcclAlgoCollnetChain;
    case Algorithm::kNcclNvls:
      return kNcclAlgoNvls;
    case Algorithm::kNcclNvlsTree:
      return kNcclAlgoNvlsTree;
    case Algorithm::kNcclPat:
      return kNcclAlgoPat;
    default:
      return -1;
  }
}

int nccl_proto(NcclProtocol p) {
  switch (p) {
    case NcclProtocol::kLL:
      return kNcclProtoLL;
    case NcclProtocol::kLL128:
      return kNcclProtoLL128;
    case NcclProtocol::kSimple:
      return kNcclProtoSimple;
    case NcclProtocol::kAny:
      break;
  }
  return -1;
}

int nccl_func(recipes::Collective c) {
  switch (c) {
    case recipes::Collective::kAllreduce:
      return kNcclFuncAllReduce;
    case recipes::Collective::kBroadcast:
      return kNcclFuncBroadcast;
    case recipes::Collective::kAllgather:
      return kNcclFuncAllGather;
    case recipes::Collective::kReduceScatter:
      return kNcclFuncReduceScatter;
  }
  return -1;
}

}  // namespace

Result<NcclRule> parse_nccl_algo(const std::string& name) {
  const auto c = parse_choice(name);
  if (!c || !is_nccl(c->first)) {
    return invalid_input("'" + name +
                         "' is not an NCCL algorithm (expected nccl_<algo>[_<proto>] with algo "
                         "tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree or pat and "
                         "proto ll, ll128 or simple)");
  }
  NcclRule r;
  r.algo = nccl_algo(c->first);
  r.proto = nccl_proto(c->second);
  return r;
}

Decision Decision::from_plan(const recipes::Plan& plan, size_t n_ranks, size_t n_nodes) {
  Decision d;
  const recipes::JobShape& job = plan.job;
  const uint64_t ranks = uint64_t(job.nodes) * uint64_t(job.ranks_per_node);
  if (uint64_t(job.nodes) != n_nodes || ranks != n_ranks) {
    d.note_ = "the plan was tuned for " + std::to_string(job.nodes) + " node(s) x " +
              std::to_string(job.ranks_per_node) + " rank(s), this communicator has " +
              std::to_string(n_ranks) + " rank(s) on " + std::to_string(n_nodes) + " node(s)";
    return d;
  }
  for (const auto& [coll, ranges] : plan.collectives) {
    for (const recipes::SizeRange& r : ranges) {
      if (!is_nccl(r.algo)) continue;  // one of dltune's host algorithms
      d.rules_.push_back(
          {nccl_func(coll), r.min_bytes, r.max_bytes, nccl_algo(r.algo), nccl_proto(r.protocol)});
    }
  }
  if (d.rules_.empty()) d.note_ = "the plan chooses no NCCL algorithm";
  return d;
}

Result<Decision> Decision::from_plan_json(const std::string& text, size_t n_ranks, size_t n_nodes) {
  auto plan = recipes::parse_plan(text);  // bounded: the file is anyone's to name
  if (!plan) return std::move(plan).error().wrap("the plan");
  return from_plan(*plan, n_ranks, n_nodes);
}

bool Decision::apply(int coll, size_t n_bytes, float** table, int num_algo, int num_proto) const {
  if (table == nullptr) return false;
  for (const NcclRule& r : rules_) {
    if (r.coll != coll || n_bytes < r.min_bytes || n_bytes >= r.max_bytes) continue;
    if (r.algo >= num_algo || r.proto >= num_proto || table[r.algo] == nullptr) return false;
    int proto = r.proto;
    if (proto < 0) {  // the cheapest protocol NCCL offers for this algorithm
      float best = std::numeric_limits<float>::infinity();
      for (int p = 0; p < num_proto; ++p) {
        const float c = table[r.algo][p];
        if (c != kNcclAlgoProtoIgnore && c >= 0 && c < best) best = c, proto = p;
      }
      if (proto < 0) return false;
    }
    if (table[r.algo][proto] == kNcclAlgoProtoIgnore || table[r.algo][proto] < 0) return false;
    table[r.algo][proto] = 0.0f;
    return true;
  }
  return false;
}

}  // namespace dltune::plugins
