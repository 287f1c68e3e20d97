// Plan collectives -> NCCL_ALGO / NCCL_PROTO (runtime_formats.h).
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "common/strings.h"
#include "tuner/db/runtime_formats.h"

namespace dltune::tuner::db {
namespace {

struct Name {
  const char* dltune;
  const char* nccl;
};
// Longest first, so that "nvls_tree" is not read as "nvls" + "_tree".
constexpr Name kAlgos[] = {{"collnet_direct", "CollnetDirect"},
                           {"collnet_chain", "CollnetChain"},
                           {"nvls_tree", "NVLSTree"},
                           {"nvls", "NVLS"},
                           {"tree", "Tree"},
                           {"ring", "Ring"},
                           {"pat", "PAT"}};
constexpr Name kProtos[] = {{"ll128", "LL128"}, {"ll", "LL"}, {"simple", "Simple"}};

struct NcclChoice {
  std::string algo;
  std::string proto;  // "" = any
};

const char* lookup(const Name* table, size_t n, std::string_view s) {
  for (size_t i = 0; i < n; ++i) {
    if (s == table[i].dltune) return table[i].nccl;
  }
  return nullptr;
}

// "nccl_ring_ll128" / "nccl_tree" / "nccl:ring/ll128" / "nccl:tree/"; nullopt for a host
// algorithm (not NCCL's).
std::optional<NcclChoice> parse(std::string_view name) {
  std::string_view algo, proto;
  if (strings::starts_with(name, "nccl:")) {
    const std::string_view rest = name.substr(5);
    const size_t slash = rest.find('/');
    algo = rest.substr(0, slash);
    proto = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  } else if (strings::starts_with(name, "nccl_")) {
    const std::string_view rest = name.substr(5);
    for (const Name& a : kAlgos) {
      const std::string_view an = a.dltune;
      if (rest == an ||
          (strings::starts_with(rest, an) && rest.size() > an.size() && rest[an.size()] == '_')) {
        algo = an;
        proto = rest.size() > an.size() ? rest.substr(an.size() + 1) : std::string_view();
        break;
      }
    }
  } else {
    return std::nullopt;
  }
  const char* a = lookup(kAlgos, std::size(kAlgos), algo);
  const char* p = proto.empty() ? "" : lookup(kProtos, std::size(kProtos), proto);
  if (a == nullptr || p == nullptr) return std::nullopt;
  return NcclChoice{a, p};
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
