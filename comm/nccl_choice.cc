// The NCCL choice names ("nccl", "nccl:ring/ll"): parsing and printing, in every build.
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "comm/nccl_communicator.h"

namespace dltune::comm {
namespace {

constexpr std::array<std::string_view, 7> kAlgos = {
    "ring", "tree", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
constexpr std::array<std::string_view, 3> kProtos = {"ll", "ll128", "simple"};

template <size_t N>
bool known(const std::array<std::string_view, N>& names, std::string_view s) {
  for (std::string_view n : names) {
    if (n == s) return true;
  }
  return false;
}

template <size_t N>
std::string join(const std::array<std::string_view, N>& names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

}  // namespace

const std::vector<std::string>& nccl_algo_names() {
  static const std::vector<std::string> v(kAlgos.begin(), kAlgos.end());
  return v;
}

const std::vector<std::string>& nccl_proto_names() {
  static const std::vector<std::string> v(kProtos.begin(), kProtos.end());
  return v;
}

const std::vector<NcclOptions>& default_nccl_choices() {
  static const std::vector<NcclOptions> v = {{"", ""},           {"ring", "ll"}, {"ring", "ll128"},
                                             {"ring", "simple"}, {"tree", "ll"}, {"tree", "ll128"},
                                             {"tree", "simple"}};
  return v;
}

Result<NcclOptions> parse_nccl_choice(const std::string& text) {
  const std::string usage =
      "write 'nccl', 'nccl:ALGO', 'nccl:ALGO/PROTO' or 'nccl:/PROTO' with ALGO one of " +
      join(kAlgos) + " and PROTO one of " + join(kProtos);
  if (text == "nccl") return NcclOptions{};
  if (text.rfind("nccl:", 0) != 0) {
    return invalid_input("'" + text + "' is not an NCCL choice; " + usage);
  }
  const std::string rest = text.substr(5);
  const size_t slash = rest.find('/');
  NcclOptions o;
  o.algo = rest.substr(0, slash);
  if (slash != std::string::npos) o.proto = rest.substr(slash + 1);
  if (o.algo.empty() && o.proto.empty()) {
    return invalid_input("'" + text + "' names neither an algorithm nor a protocol; " + usage);
  }
  if (!o.algo.empty() && !known(kAlgos, o.algo)) {
    return invalid_input("unknown NCCL algorithm '" + o.algo + "' in '" + text +
                         "'; expected one of " + join(kAlgos));
  }
  if (!o.proto.empty() && !known(kProtos, o.proto)) {
    return invalid_input("unknown NCCL protocol '" + o.proto + "' in '" + text +
                         "'; expected one of " + join(kProtos));
  }
  return o;
}

std::string nccl_choice_name(const NcclOptions& opts) {
  if (opts.algo.empty() && opts.proto.empty()) return "nccl";
  return "nccl:" + opts.algo + "/" + opts.proto;
}

}  // namespace dltune::comm
