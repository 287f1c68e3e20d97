// `dltune topo`: what dltune sees in a machine (topology issue): a readable summary, the
// GPU/NIC matrix in nvidia-smi's layout and the rank placement, or the same as JSON, or only
// the fingerprint, or (--export) hwloc's XML export of it, which a launch over hosts (-H) asks
// the first host for to plan with that host's own topology.
#include <cstdio>
#include <memory>
#include <string>

#include "common/env.h"
#include "common/paths.h"
#include "common/strings.h"
#include "launcher/cli/commands.h"
#include "topology/topology.h"

namespace dltune::cli {
namespace {

constexpr int64_t kMaxLocalRanks = 4096;

struct TopoOptions {
  std::string xml;    // "" = DLTUNE_TOPO_XML, else the live machine
  std::string ranks;  // "" = the default count
  std::string bind;
  std::string map_by = "core";  // mpirun's --map-by
  bool json = false;
  bool fingerprint_only = false;
  bool export_xml = false;
};

Result<int> parse_ranks(const std::string& text) {
  if (text.empty()) return 0;
  auto n = strings::parse_int(text);
  if (!n || *n < 1 || *n > kMaxLocalRanks) {
    return invalid_input("-n expects a number of local ranks from 1 to " +
                         std::to_string(kMaxLocalRanks) + ", got '" + text + "'");
  }
  return static_cast<int>(*n);
}

Status run_topo(const TopoOptions& opts) {
  auto ranks = parse_ranks(opts.ranks);
  if (!ranks) return std::move(ranks).error();
  auto policy = topology::parse_bind_policy(opts.bind);
  if (!policy) return std::move(policy).error().wrap("--bind");
  auto map = topology::parse_map_policy(opts.map_by);
  if (!map) return std::move(map).error().wrap("--map-by");
  if (opts.export_xml) {
    if (!opts.xml.empty()) {
      auto checked = topology::load_xml(opts.xml);  // the checks every reader makes
      if (!checked) return std::move(checked).error();
    }
    auto xml = opts.xml.empty() ? topology::export_default_xml() : paths::read_file(opts.xml);
    if (!xml) return std::move(xml).error();
    std::fwrite(xml->data(), 1, xml->size(), stdout);
    return ok_status();
  }
  auto topo = opts.xml.empty() ? topology::discover_default() : topology::load_xml(opts.xml);
  if (!topo) return std::move(topo).error();
  if (opts.fingerprint_only) {
    std::printf("%s\n", topology::fingerprint(*topo).c_str());
    return ok_status();
  }
  const auto placement = topology::place(*topo, *ranks, *policy, *map);
  const std::string out = opts.json ? topology::render_json(*topo, placement) + "\n"
                                    : topology::render_text(*topo, placement);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return ok_status();
}

}  // namespace

void setup_topo(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("topo", "Show the node's CPUs, GPUs, NICs and rank placement");
  auto opts = std::make_shared<TopoOptions>();
  opts->bind = env::get(env::kBind);
  cmd->add_option("--xml", opts->xml,
                  "Read this hwloc XML export instead of the live machine (default: "
                  "$DLTUNE_TOPO_XML when set)");
  cmd->add_flag("--json", opts->json, "Print the model, paths and placement as JSON");
  cmd->add_flag("--fingerprint", opts->fingerprint_only, "Print only the topology fingerprint");
  cmd->add_flag("--export", opts->export_xml,
                "Print hwloc's XML export of the machine (of --xml or $DLTUNE_TOPO_XML when "
                "given), which --xml and DLTUNE_TOPO_XML read");
  cmd->add_option("-n,--ranks", opts->ranks,
                  "Local ranks to place (default: one per GPU, else one per NUMA node)");
  cmd->add_option("--bind", opts->bind,
                  "CPU binding: auto, core, numa or none (default: "
                  "$DLTUNE_BIND, else auto)");
  cmd->add_option("--map-by", opts->map_by,
                  "How the ranks are dealt over the NUMA domains, as mpirun's --map-by: core "
                  "(default; consecutive ranks on a domain), numa or socket (round-robin)");
  cmd->callback([exit_code, opts] {
    const int outputs = int{opts->json} + int{opts->fingerprint_only} + int{opts->export_xml};
    if (outputs > 1) {
      *exit_code = report_error("topo", invalid_input("--json, --fingerprint and --export "
                                                      "exclude each other: give one of them"));
      return;
    }
    const Status st = run_topo(*opts);
    *exit_code = st.ok() ? 0 : report_error("topo", st.error());
  });
}

}  // namespace dltune::cli
