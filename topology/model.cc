// Small model helpers: names of path classes and NIC kinds, CPU lists, the per-rank
// environment that points a rank at its GPU and NIC, and the fingerprint.
#include <algorithm>
#include <sstream>

#include "common/hash.h"
#include "topology/topology.h"

namespace dltune::topology {

std::string Path::str() const {
  switch (type) {
    case PathType::kSelf:
      return "X";
    case PathType::kNvLink:
      return "NV" + std::to_string(links);
    case PathType::kPix:
      return "PIX";
    case PathType::kPxb:
      return "PXB";
    case PathType::kPhb:
      return "PHB";
    case PathType::kNode:
      return "NODE";
    case PathType::kSys:
      return "SYS";
  }
  return "SYS";
}

const char* nic_kind_name(NicKind kind) {
  switch (kind) {
    case NicKind::kInfiniband:
      return "infiniband";
    case NicKind::kRoce:
      return "roce";
    case NicKind::kOmnipath:
      return "omnipath";
    case NicKind::kEfa:
      return "efa";
    case NicKind::kSlingshot:
      return "slingshot";
    case NicKind::kEthernet:
      return "ethernet";
  }
  return "ethernet";
}

int Topology::hpc_nic_count() const {
  return static_cast<int>(
      std::count_if(nics.begin(), nics.end(), [](const Nic& n) { return n.hpc; }));
}

std::string cpu_list(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> rank_env(const Topology& topo,
                                                          const RankPlacement& rank) {
  std::vector<std::pair<std::string, std::string>> env;
  if (rank.gpu >= 0 && rank.gpu < static_cast<int>(topo.gpus.size())) {
    const Gpu& g = topo.gpus[rank.gpu];
    const std::string idx = std::to_string(g.vendor_index);
    if (g.vendor == "nvidia") {
      env.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
      env.emplace_back("CUDA_VISIBLE_DEVICES", idx);
    } else if (g.vendor == "amd") {
      env.emplace_back("ROCR_VISIBLE_DEVICES", idx);
    }
  }
  const auto nic = std::find_if(topo.nics.begin(), topo.nics.end(),
                                [&](const Nic& n) { return n.name == rank.nic; });
  if (rank.nic.empty() || nic == topo.nics.end()) return env;
  switch (nic->kind) {
    case NicKind::kInfiniband:
    case NicKind::kRoce:
    case NicKind::kOmnipath:
      env.emplace_back("NCCL_IB_HCA", "=" + nic->name);  // '=': exact name, not a prefix
      env.emplace_back("UCX_NET_DEVICES", nic->name + ":1");
      if (nic->kind != NicKind::kOmnipath) {
        env.emplace_back("OMPI_MCA_btl_openib_if_include", nic->name + ":1");
      }
      break;
    case NicKind::kEfa:
      env.emplace_back("FI_PROVIDER", "efa");
      break;
    case NicKind::kSlingshot:
      env.emplace_back("FI_PROVIDER", "cxi");
      break;
    case NicKind::kEthernet:
      break;
  }
  if (!nic->netdev.empty()) {
    env.emplace_back("NCCL_SOCKET_IFNAME", "=" + nic->netdev);
    env.emplace_back("OMPI_MCA_btl_tcp_if_include", nic->netdev);
  }
  return env;
}

// One line per fact, in a fixed order; NUMA nodes and packages by logical position so that
// the text depends on the hardware, not on how the OS numbered it.
std::string fingerprint_text(const Topology& topo) {
  std::ostringstream os;
  os << "dltune-topology-fingerprint v1\n";
  for (const auto& p : topo.packages) {
    os << "package cpu=\"" << p.cpu_model << "\" cores=" << p.cores << " pus=" << p.pus << "\n";
  }
  auto numa_pos = [&](int os_index) {
    for (size_t i = 0; i < topo.numa_nodes.size(); ++i) {
      if (topo.numa_nodes[i].os_index == os_index) return static_cast<int>(i);
    }
    return -1;
  };
  for (const auto& n : topo.numa_nodes) {
    // Memory size is left out: identical nodes differ by what firmware and kernel reserve.
    os << "numa pus=" << n.pus.size() << "\n";
  }
  os << "cores=" << topo.cores.size() << " pus=" << topo.pus << "\n";
  for (const auto& g : topo.gpus) {
    os << "gpu vendor=" << g.vendor << " model=\"" << g.model << "\" numa=" << numa_pos(g.numa)
       << "\n";
  }
  for (const auto& n : topo.nics) {
    os << "nic kind=" << nic_kind_name(n.kind) << " hpc=" << n.hpc << " model=\"" << n.model
       << "\" pci=" << n.pci_id << " numa=" << numa_pos(n.numa) << "\n";
  }
  auto matrix = [&](const char* name, const std::vector<std::vector<Path>>& m) {
    for (const auto& row : m) {
      os << name;
      for (const auto& p : row) os << ' ' << p.str();
      os << "\n";
    }
  };
  matrix("gpu_paths", topo.gpu_paths);
  matrix("gpu_nic_paths", topo.gpu_nic_paths);
  os << "nvlink=" << topo.has_nvlink << "\n";
  return os.str();
}

std::string fingerprint(const Topology& topo) { return sha256_hex(fingerprint_text(topo)); }

}  // namespace dltune::topology
