// The human-readable `dltune topo` output: summary, nvidia-smi style matrix, placement.
// Golden files in topology/tests/data/ pin this format; change them with
// DLTUNE_UPDATE_GOLDEN=1 when a change here is intended.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "common/strings.h"
#include "topology/topology.h"

namespace dltune::topology {
namespace {

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

std::string numa_str(int numa) { return numa >= 0 ? std::to_string(numa) : "-"; }

void render_cpus(const Topology& t, std::ostringstream& os) {
  os << "CPUs: " << t.packages.size() << " package(s), " << t.numa_nodes.size() << " NUMA node(s), "
     << t.cores.size() << " core(s), " << t.pus << " PU(s); usable PUs " << cpu_list(t.usable_pus)
     << "\n";
  for (const auto& p : t.packages) {
    os << "  package " << p.os_index << ": "
       << (p.cpu_model.empty() ? std::string("unknown CPU model") : p.cpu_model) << ", " << p.cores
       << " cores, " << p.pus << " PUs\n";
  }
  for (const auto& n : t.numa_nodes) {
    os << "  NUMA node " << n.os_index << " (package " << numa_str(n.package) << "): PUs "
       << (n.pus.empty() ? std::string("none") : cpu_list(n.pus)) << ", " << gib(n.memory_bytes)
       << "\n";
  }
}

void render_devices(const Topology& t, std::ostringstream& os) {
  if (t.gpus.empty()) {
    os << "GPUs: none (no NVIDIA or AMD GPU found)\n";
  } else {
    os << "GPUs: " << t.gpus.size() << "\n";
    for (const auto& g : t.gpus) {
      os << "  " << pad("GPU" + std::to_string(g.index), 6) << pad(g.name, 8) << pad(g.busid, 14)
         << pad(g.vendor, 7) << g.model << ", NUMA " << numa_str(g.numa) << ", closest NIC: "
         << (g.closest_nics.empty() ? std::string("none") : strings::join(g.closest_nics, ", "))
         << "\n";
    }
  }
  const int hpc = t.hpc_nic_count();
  if (hpc == 0) {
    os << "HPC NICs: none (no InfiniBand, RoCE, Omni-Path, EFA or Slingshot NIC found)\n";
  } else {
    os << "HPC NICs: " << hpc << "\n";
  }
  for (const auto& n : t.nics) {
    if (!n.hpc) continue;
    os << "  " << pad(n.name, 12) << pad(nic_kind_name(n.kind), 11) << pad(n.busid, 14) << "NUMA "
       << numa_str(n.numa) << ", " << n.model;
    if (!n.netdev.empty() && n.netdev != n.name) os << ", netdev " << n.netdev;
    if (n.link_gbps > 0) os << ", " << n.link_gbps << " Gb/s";
    os << "\n";
  }
  const size_t other = t.nics.size() - static_cast<size_t>(hpc);
  if (other > 0)
    os << "Other NICs (management Ethernet, not used for HPC traffic): " << other << "\n";
  for (const auto& n : t.nics) {
    if (n.hpc) continue;
    os << "  " << pad(n.name, 12) << pad(n.busid, 14) << "NUMA " << numa_str(n.numa) << ", "
       << n.model << "\n";
  }
}

void render_placement(const Placement& p, const Topology& t, std::ostringstream& os) {
  os << "Placement: " << p.ranks.size() << " local rank(s), " << p.rule << "\n";
  os << "  rank  GPU   NIC           NUMA  CPUs\n";
  for (const auto& r : p.ranks) {
    const std::string gpu = r.gpu >= 0 ? "GPU" + std::to_string(r.gpu) : "-";
    os << "  " << pad(std::to_string(r.local_rank), 6) << pad(gpu, 6)
       << pad(r.nic.empty() ? "-" : r.nic, 14) << pad(numa_str(r.numa), 6)
       << (r.cpus.empty() ? std::string("not bound") : r.cpuset) << "\n";
  }
  if (t.gpus.empty() && t.hpc_nic_count() == 0) {
    os << "No GPU and no HPC NIC on this node: ranks run on CPU cores and communicate through "
          "shared memory or TCP.\n";
  }
}

}  // namespace

std::string render_matrix(const Topology& t) {
  std::vector<size_t> nics;  // HPC NICs only, as nvidia-smi shows RDMA devices only
  for (size_t k = 0; k < t.nics.size(); ++k) {
    if (t.nics[k].hpc) nics.push_back(k);
  }
  if (t.gpus.empty() && nics.empty()) return "";
  std::vector<std::string> labels;
  for (const auto& g : t.gpus) labels.push_back("GPU" + std::to_string(g.index));
  for (size_t i = 0; i < nics.size(); ++i) labels.push_back("NIC" + std::to_string(i));
  std::vector<std::string> affinity;
  size_t aff_width = 14;
  for (const auto& g : t.gpus) {
    affinity.push_back(cpu_list(g.local_pus));
    aff_width = std::max(aff_width, affinity.back().size() + 2);
  }
  std::ostringstream os;
  os << pad("", 8);
  for (const auto& l : labels) os << pad(l, 7);
  if (!t.gpus.empty()) os << pad("CPU Affinity", aff_width) << "NUMA Affinity";
  std::string header = os.str();
  while (!header.empty() && header.back() == ' ') header.pop_back();
  os.str(header);
  os.seekp(0, std::ios_base::end);
  os << "\n";
  const size_t ng = t.gpus.size();
  for (size_t r = 0; r < labels.size(); ++r) {
    std::string line = pad(labels[r], 8);
    for (size_t c = 0; c < labels.size(); ++c) {
      Path p;
      if (r < ng && c < ng) p = t.gpu_paths[r][c];
      if (r < ng && c >= ng) p = t.gpu_nic_paths[r][nics[c - ng]];
      if (r >= ng && c < ng) p = t.gpu_nic_paths[c][nics[r - ng]];
      if (r >= ng && c >= ng) p = t.nic_paths[nics[r - ng]][nics[c - ng]];
      line += pad(p.type == PathType::kSelf ? " X" : p.str(), 7);
    }
    if (r < ng) line += pad(affinity[r], aff_width) + numa_str(t.gpus[r].numa);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << "\n";
  }
  os << "\nLegend:\n\n"
        "  X    = Self\n"
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA "
        "nodes\n"
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
        "Bridges within a NUMA node\n"
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
        "Bridge)\n"
        "  PIX  = Connection traversing at most a single PCIe bridge\n"
        "  NV#  = Connection traversing a bonded set of # NVLinks\n";
  if (!nics.empty()) {
    os << "\nNIC Legend:\n\n";
    for (size_t i = 0; i < nics.size(); ++i) {
      os << "  NIC" << i << ": " << t.nics[nics[i]].name << "\n";
    }
  }
  return os.str();
}

std::string render_text(const Topology& t, const Placement& placement) {
  std::ostringstream os;
  os << "Topology of "
     << (t.source == "live" ? std::string("this machine (live hwloc)") : "'" + t.source + "'")
     << "\n";
  render_cpus(t, os);
  render_devices(t, os);
  const std::string matrix = render_matrix(t);
  if (!matrix.empty()) os << "\n" << matrix;
  os << "\n";
  render_placement(placement, t, os);
  os << "\nFingerprint: " << fingerprint(t) << "\n";
  return os.str();
}

}  // namespace dltune::topology
