// Plan collectives -> NCCL_ALGO / NCCL_PROTO (runtime_formats.h).
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "common/collectives.h"
#include "common/strings.h"
#include "tuner/db/runtime_formats.h"

namespace dltune::tuner::db {
namespace {

struct NcclChoice {
  std::string algo;
  std::string proto;  // "" = any
};

// NCCL's names for its algorithms and protocols in NCCL_ALGO / NCCL_PROTO.
const char* nccl_algo_name(Algorithm a) {
  switch (a) {
    case Algorithm::kNcclTree:
      return "Tree";
    case Algorithm::kNcclRing:
      return "Ring";
    case Algorithm::kNcclCollnetDirect:
      return "CollnetDirect";
    case Algorithm::kNcclCollnetChain:
      return "CollnetChain";
    case Algorithm::kNcclNvls:
      return "NVLS";
    case Algorithm::kNcclNvlsTree:
      return "NVLSTree";
    case Algorithm::kNcclPat:
      return "PAT";
    default:
      return nullptr;
  }
}
const char* nccl_proto_name(NcclProtocol p) {
  switch (p) {
    case NcclProtocol::kLL:
      return "LL";
    case NcclProtocol::kLL128:
      return "LL128";
    case NcclProtocol::kSimple:
      return "Simple";
    case NcclProtocol::kAny:
      break;
  }
  return "";
}

// An NCCL algorithm as plans spell it (common/collectives.h parse_choice): "nccl_ring_ll128",
// "nccl_tree"; nullopt for a host algorithm (not NCCL's).
std::optional<NcclChoice> parse(std::string_view name) {
  const auto c = parse_choice(name);
  if (!c) return std::nullopt;
  const char* a = nccl_algo_name(c->first);
  if (a == nullptr) return std::nullopt;
  return NcclChoice{a, nccl_proto_name(c->second)};
}

// dltune's collective name -> NCCL's function name in NCCL_ALGO; nullptr when NCCL has none.
const char* nccl_function(const std::string& c) {
  if (c == "allreduce") return "allreduce";
  if (c == "broadcast" || c == "bcast") return "broadcast";
  if (c == "reduce") return "reduce";
  if (c == "allgather") return "allgather";
  if (c == "reduce_scatter" || c == "reducescatter") return "reducescatter";
  return nullptr;
}

void push_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

}  // namespace

Result<std::string> nccl_env(const PlanCollectives& plan, std::vector<std::string>* notes) {
  std::vector<std::string> algo_items, proto_items;
  for (const auto& [name, ranges] : plan) {
    const char* fn = nccl_function(name);
    if (fn == nullptr) {
      notes->push_back(name + ": not an NCCL collective; skipped");
      continue;
    }
    std::vector<std::string> algos, protos;
    bool any_proto = false, skipped = false;
    for (const CollectiveRange& r : ranges) {
      const auto c = parse(r.algo);
      if (!c) {
        skipped = true;
        continue;
      }
      push_unique(algos, c->algo);
      if (c->proto.empty()) {
        any_proto = true;
      } else {
        push_unique(protos, c->proto);
      }
    }
    if (skipped) {
      notes->push_back(name + ": ranges with host algorithms (not NCCL's) are left to NCCL");
    }
    if (algos.empty()) continue;
    if (algos.size() > 1 || (!any_proto && protos.size() > 1) || (any_proto && !protos.empty())) {
      notes->push_back(name +
                       ": NCCL's variables cannot tie a choice to a message size; the plan's "
                       "choices are all allowed and NCCL picks among them (dltune's NCCL tuner "
                       "plugin applies them per size)");
    }
    algo_items.push_back(std::string(fn) + ":" + strings::join(algos, ","));
    if (!any_proto) proto_items.push_back(std::string(fn) + ":" + strings::join(protos, ","));
  }
  if (algo_items.empty()) {
    return invalid_input(
        "the plan chooses no NCCL algorithm (GPU algorithms are named "
        "nccl_<algo>[_<proto>]); nothing to export");
  }
  std::string out =
      "# NCCL settings from a dltune plan: source these lines (NCCL 2.24 or newer).\n";
  out += "export NCCL_ALGO='" + strings::join(algo_items, ";") + "'\n";
  if (!proto_items.empty()) out += "export NCCL_PROTO='" + strings::join(proto_items, ";") + "'\n";
  return out;
}

}  // namespace dltune::tuner::db
