// `dltune topo --json`: the model as JSON. Field names are a stable interface (DESIGN.md,
// "Machine-readable outputs"): add fields, never rename or remove them.
#include <nlohmann/json.hpp>

#include "topology/topology.h"

namespace dltune::topology {
namespace {

using nlohmann::json;

json path_matrix(const std::vector<std::vector<Path>>& m) {
  json out = json::array();
  for (const auto& row : m) {
    json r = json::array();
    for (const auto& p : row) r.push_back(p.str());
    out.push_back(r);
  }
  return out;
}

json cpu_json(const Topology& t) {
  json pkgs = json::array();
  for (const auto& p : t.packages) {
    pkgs.push_back(
        {{"os_index", p.os_index}, {"cpu_model", p.cpu_model}, {"cores", p.cores}, {"pus", p.pus}});
  }
  json numa = json::array();
  for (const auto& n : t.numa_nodes) {
    numa.push_back({{"os_index", n.os_index},
                    {"package", n.package},
                    {"memory_bytes", n.memory_bytes},
                    {"cpus", cpu_list(n.pus)}});
  }
  return {{"packages", pkgs}, {"numa_nodes", numa}};
}

json gpus_json(const Topology& t) {
  json out = json::array();
  for (const auto& g : t.gpus) {
    out.push_back({{"index", g.index},
                   {"vendor_index", g.vendor_index},
                   {"name", g.name},
                   {"busid", g.busid},
                   {"vendor", g.vendor},
                   {"model", g.model},
                   {"numa", g.numa},
                   {"package", g.package},
                   {"local_cpus", cpu_list(g.local_pus)},
                   {"closest_nics", g.closest_nics}});
  }
  return out;
}

json nics_json(const Topology& t) {
  json out = json::array();
  for (const auto& n : t.nics) {
    out.push_back({{"name", n.name},
                   {"netdev", n.netdev},
                   {"busid", n.busid},
                   {"kind", nic_kind_name(n.kind)},
                   {"hpc", n.hpc},
                   {"numa", n.numa},
                   {"package", n.package},
                   {"model", n.model},
                   {"pci_id", n.pci_id},
                   {"link_gbps", n.link_gbps}});
  }
  return out;
}

json placement_json(const Placement& p) {
  json out = json::array();
  for (const auto& r : p.ranks) {
    out.push_back({{"local_rank", r.local_rank},
                   {"cpus", r.cpus},
                   {"cpuset", r.cpuset},
                   {"gpu", r.gpu},
                   {"nic", r.nic},
                   {"numa", r.numa}});
  }
  return out;
}

}  // namespace

std::string render_json(const Topology& t, const Placement& placement, int indent) {
  json j;
  j["source"] = t.source;
  j["packages"] = t.packages.size();
  j["numa_nodes"] = t.numa_nodes.size();
  j["cores"] = t.cores.size();
  j["pus"] = t.pus;
  j["usable_cpus"] = cpu_list(t.usable_pus);
  j["cpu"] = cpu_json(t);
  j["gpus"] = gpus_json(t);
  j["nics"] = nics_json(t);
  j["hpc_nics"] = t.hpc_nic_count();
  j["nvlink"] = t.has_nvlink;
  j["gpu_paths"] = path_matrix(t.gpu_paths);
  j["gpu_nic_paths"] = path_matrix(t.gpu_nic_paths);
  j["placement"] = placement_json(placement);
  j["placement_rule"] = placement.rule;
  j["fingerprint"] = fingerprint(t);
  // Replace invalid UTF-8 (model strings come from firmware) instead of throwing.
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace dltune::topology
