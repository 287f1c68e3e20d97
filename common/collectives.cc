#include "common/collectives.h"

#include <array>

namespace dltune {
namespace {

// Longest NCCL names first within a prefix ("nvls_tree" before "nvls") is parse_choice's
// concern; here every name is exact.
constexpr std::array<std::pair<Algorithm, std::string_view>, 15> kAlgorithms{{
    {Algorithm::kRing, "ring"},
    {Algorithm::kRecursiveDoubling, "rd"},
    {Algorithm::kRabenseifner, "rabenseifner"},
    {Algorithm::kTree, "tree"},
    {Algorithm::kHierarchical, "hier"},
    {Algorithm::kShm, "shm"},
    {Algorithm::kCma, "cma"},
    {Algorithm::kNative, "native"},
    {Algorithm::kNcclTree, "nccl_tree"},
    {Algorithm::kNcclRing, "nccl_ring"},
    {Algorithm::kNcclCollnetDirect, "nccl_collnet_direct"},
    {Algorithm::kNcclCollnetChain, "nccl_collnet_chain"},
    {Algorithm::kNcclNvls, "nccl_nvls"},
    {Algorithm::kNcclNvlsTree, "nccl_nvls_tree"},
    {Algorithm::kNcclPat, "nccl_pat"},
}};

constexpr std::array<std::pair<NcclProtocol, std::string_view>, 4> kProtocols{{
    {NcclProtocol::kAny, ""},
    {NcclProtocol::kLL, "ll"},
    {NcclProtocol::kLL128, "ll128"},
    {NcclProtocol::kSimple, "simple"},
}};

std::optional<NcclProtocol> parse_protocol(std::string_view s) {
  for (const auto& [p, name] : kProtocols)
    if (name == s) return p;
  return std::nullopt;
}

}  // namespace

std::string_view algorithm_name(Algorithm a) {
  for (const auto& [value, name] : kAlgorithms)
    if (value == a) return name;
  return "?";
}

std::optional<Algorithm> parse_algorithm(std::string_view s) {
  for (const auto& [value, name] : kAlgorithms)
    if (name == s) return value;
  return std::nullopt;
}

std::vector<std::string> algorithm_names() {
  std::vector<std::string> out;
  for (const auto& entry : kAlgorithms) out.emplace_back(entry.second);
  return out;
}

bool is_nccl(Algorithm a) { return a >= Algorithm::kNcclTree; }

const std::vector<Algorithm>& host_algorithms() {
  static const std::vector<Algorithm> kHost = {
      Algorithm::kRing,         Algorithm::kRecursiveDoubling,
      Algorithm::kRabenseifner, Algorithm::kTree,
      Algorithm::kHierarchical, Algorithm::kShm,
      Algorithm::kCma,          Algorithm::kNative};
  return kHost;
}

std::string_view nccl_protocol_name(NcclProtocol p) {
  for (const auto& [value, name] : kProtocols)
    if (value == p) return name;
  return "?";
}

std::optional<std::pair<Algorithm, NcclProtocol>> parse_choice(std::string_view s) {
  if (s.starts_with("nccl:")) {  // an NCCL communicator's choice: nccl:ALGO[/PROTO]
    const std::string_view rest = s.substr(5);
    const size_t slash = rest.find('/');
    const std::string_view proto = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
    auto a = parse_algorithm("nccl_" + std::string(rest.substr(0, slash)));
    auto p = parse_protocol(proto);
    if (!a || !p) return std::nullopt;
    return std::make_pair(*a, *p);
  }
  if (auto a = parse_algorithm(s)) return std::make_pair(*a, NcclProtocol::kAny);
  // nccl_ALGO_PROTO: the longest algorithm name that leaves "_" + a protocol.
  std::optional<std::pair<Algorithm, NcclProtocol>> best;
  size_t best_len = 0;
  for (const auto& [value, name] : kAlgorithms) {
    if (!is_nccl(value) || s.size() <= name.size() + 1 || !s.starts_with(name) ||
        s[name.size()] != '_')
      continue;
    auto p = parse_protocol(s.substr(name.size() + 1));
    if (p && *p != NcclProtocol::kAny && name.size() > best_len) {
      best = std::make_pair(value, *p);
      best_len = name.size();
    }
  }
  return best;
}

std::string choice_name(Algorithm a, NcclProtocol p) {
  std::string s(algorithm_name(a));
  if (is_nccl(a) && p != NcclProtocol::kAny) s += "_" + std::string(nccl_protocol_name(p));
  return s;
}

}  // namespace dltune
