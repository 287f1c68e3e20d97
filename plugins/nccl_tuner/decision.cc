#include "plugins/nccl_tuner/decision.h"

#include <array>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/json_input.h"
#include "plugins/nccl_tuner/nccl_tuner_abi.h"

namespace dltune::plugins {
namespace {

constexpr std::array<std::pair<const char*, int>, 7> kAlgos = {{
    {"collnet_direct", kNcclAlgoCollnetDirect},
    {"collnet_chain", kNcclAlgoCollnetChain},
    {"nvls_tree", kNcclAlgoNvlsTree},
    {"nvls", kNcclAlgoNvls},
    {"tree", kNcclAlgoTree},
    {"ring", kNcclAlgoRing},
    {"pat", kNcclAlgoPat},
}};
constexpr std::array<std::pair<const char*, int>, 3> kProtos = {
    {{"ll128", kNcclProtoLL128}, {"ll", kNcclProtoLL}, {"simple", kNcclProtoSimple}}};
constexpr std::array<std::pair<const char*, int>, 5> kColls = {{
    {"broadcast", kNcclFuncBroadcast},
    {"reduce", kNcclFuncReduce},
    {"allgather", kNcclFuncAllGather},
    {"reduce_scatter", kNcclFuncReduceScatter},
    {"allreduce", kNcclFuncAllReduce},
}};

}  // namespace

Result<NcclRule> parse_nccl_algo(const std::string& name) {
  // The NCCL communicator's choice names (comm/nccl_communicator.h): "nccl:ring/ll" is
  // "nccl_ring_ll", "nccl:ring/" and "nccl:ring" are "nccl_ring".
  if (name.rfind("nccl:", 0) == 0) {
    const std::string rest = name.substr(5);
    const size_t slash = rest.find('/');
    const std::string algo = rest.substr(0, slash);
    const std::string proto = slash == std::string::npos ? "" : rest.substr(slash + 1);
    if (algo.empty()) return invalid_input("'" + name + "' fixes no NCCL algorithm");
    return parse_nccl_algo("nccl_" + algo + (proto.empty() ? "" : "_" + proto));
  }
  const std::string prefix = "nccl_";
  if (name.rfind(prefix, 0) != 0) return invalid_input("'" + name + "' is not an NCCL algorithm");
  const std::string rest = name.substr(prefix.size());
  // Longest algorithm names first, so "nvls_tree" is not read as "nvls" + "_tree".
  for (const auto& [algo_name, algo] : kAlgos) {
    const std::string a = algo_name;
    if (rest.rfind(a, 0) != 0) continue;
    NcclRule r;
    r.algo = algo;
    if (rest.size() == a.size()) return r;
    if (rest[a.size()] != '_') continue;
    const std::string proto = rest.substr(a.size() + 1);
    for (const auto& [proto_name, p] : kProtos) {
      if (proto == proto_name) {
        r.proto = p;
        return r;
      }
    }
    return invalid_input("'" + name + "': unknown NCCL protocol '" + proto +
                         "' (expected ll, ll128 or simple)");
  }
  return invalid_input("'" + name + "': unknown NCCL algorithm (expected tree, ring, " +
                       "collnet_direct, collnet_chain, nvls, nvls_tree or pat)");
}

Result<Decision> Decision::from_plan_json(const std::string& text, size_t n_ranks, size_t n_nodes) {
  // The plan is a file anyone may name in DLTUNE_PLAN: bounded before anything walks it.
  auto parsed = parse_json_bounded(text, {.max_bytes = size_t{4} << 20, .max_depth = 16});
  if (!parsed) return std::move(parsed).error().wrap("the plan");
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return invalid_input("the plan is not a JSON object");
  Decision d;
  if (j.contains("job") && j["job"].is_object()) {
    const auto& job = j["job"];
    // job.value() would throw on a value of another type: read only unsigned integers.
    const auto count = [&job](const char* key) {
      return job.contains(key) && job[key].is_number_unsigned() ? job[key].get<uint64_t>()
                                                                : uint64_t{0};
    };
    const uint64_t nodes = count("nodes");
    const uint64_t rpn = count("ranks_per_node");
    uint64_t ranks = 0;
    if (nodes != 0 && rpn != 0 &&
        (nodes != n_nodes || __builtin_mul_overflow(nodes, rpn, &ranks) || ranks != n_ranks)) {
      d.note_ = "the plan was tuned for " + std::to_string(nodes) + " node(s) x " +
                std::to_string(rpn) + " rank(s), this communicator has " + std::to_string(n_ranks) +
                " rank(s) on " + std::to_string(n_nodes) + " node(s)";
      return d;
    }
  }
  if (!j.contains("collectives")) {
    d.note_ = "the plan has no collectives section";
    return d;
  }
  if (!j["collectives"].is_object()) return invalid_input("plan: 'collectives' is not an object");
  for (const auto& [coll_name, coll] : kColls) {
    if (!j["collectives"].contains(coll_name)) continue;
    const auto& ranges = j["collectives"][coll_name];
    if (!ranges.is_array()) {
      return invalid_input(std::string("plan: collectives.") + coll_name + " is not a list");
    }
    for (const auto& r : ranges) {
      if (!r.is_object() || !r.contains("algo") || !r["algo"].is_string() ||
          !r.contains("min_bytes") || !r["min_bytes"].is_number_unsigned() ||
          !r.contains("max_bytes") || !r["max_bytes"].is_number_unsigned()) {
        return invalid_input(std::string("plan: a collectives.") + coll_name +
                             " entry lacks algo, min_bytes or max_bytes");
      }
      const std::string algo = r["algo"].get<std::string>();
      if (algo.rfind("nccl_", 0) != 0 && algo.rfind("nccl:", 0) != 0) continue;  // a CPU one
      if (algo.rfind("nccl:/", 0) == 0) continue;  // a protocol only: NCCL picks the algorithm
      auto rule = parse_nccl_algo(algo);
      if (!rule) return std::move(rule).error().wrap("plan");
      rule->coll = coll;
      rule->min_bytes = r["min_bytes"].get<uint64_t>();
      rule->max_bytes = r["max_bytes"].get<uint64_t>();
      d.rules_.push_back(*rule);
    }
  }
  if (d.rules_.empty()) d.note_ = "the plan chooses no NCCL algorithm";
  return d;
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
