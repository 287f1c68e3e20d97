// From a loaded hwloc topology to the plain model: CPUs (packages, NUMA nodes, cores, PUs),
// then GPUs and NICs found as PCI devices, then the path matrices and closest NICs.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "common/log.h"
#include "common/strings.h"
#include "topology/hwloc_source.h"
#include "topology/pci_paths.h"

namespace dltune::topology::detail {
namespace {

constexpr unsigned kVendorNvidia = 0x10de;
constexpr unsigned kVendorAmd = 0x1002;
constexpr unsigned kVendorIntel = 0x8086;
constexpr unsigned kVendorAmazon = 0x1d0f;
constexpr unsigned kVendorHpeCray = 0x17db;  // Slingshot (Cassini) NICs

std::string info(hwloc_obj_t o, const char* name) {
  const char* v = hwloc_obj_get_info_by_name(o, name);
  return v != nullptr ? v : "";
}

std::vector<int> bitmap_list(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (set == nullptr) return out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

int ancestor_os_index(hwloc_obj_t o, hwloc_obj_type_t type) {
  for (; o != nullptr; o = o->parent) {
    if (o->type == type) return static_cast<int>(o->os_index);
  }
  return -1;
}

std::string busid(hwloc_obj_t pci) {
  char buf[32];
  const auto& a = pci->attr->pcidev;
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", a.domain, a.bus, a.dev, a.func);
  return buf;
}

std::string pci_id(hwloc_obj_t pci) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x:%04x", pci->attr->pcidev.vendor_id,
                pci->attr->pcidev.device_id);
  return buf;
}

// The PCI device name hwloc found (from the pci.ids database on the source machine), else the
// ids; Slingshot NICs have no pci.ids entry on most systems.
std::string pci_model(hwloc_obj_t pci) {
  std::string m = info(pci, "PCIDevice");
  if (!m.empty()) return m;
  if (pci->attr->pcidev.vendor_id == kVendorHpeCray)
    return "HPE Slingshot NIC [" + pci_id(pci) + "]";
  return "[" + pci_id(pci) + "]";
}

void build_cpus(hwloc_topology_t t, Topology& topo) {
  const int npkg = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  for (int i = 0; i < npkg; ++i) {
    hwloc_obj_t p = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, i);
    Package pkg;
    pkg.os_index = static_cast<int>(p->os_index);
    pkg.cpu_model = strings::trim(info(p, "CPUModel"));  // Tioga's ends in 16 spaces
    pkg.cores = hwloc_get_nbobjs_inside_cpuset_by_type(t, p->cpuset, HWLOC_OBJ_CORE);
    pkg.pus = hwloc_get_nbobjs_inside_cpuset_by_type(t, p->cpuset, HWLOC_OBJ_PU);
    topo.packages.push_back(pkg);
  }
  const int nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t n = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
    NumaNode node;
    node.os_index = static_cast<int>(n->os_index);
    node.package = ancestor_os_index(n, HWLOC_OBJ_PACKAGE);
    node.memory_bytes = n->attr->numanode.local_memory;
    node.pus = bitmap_list(n->cpuset);
    topo.numa_nodes.push_back(node);
  }
  // Cores in hwloc's logical order (tree order: NUMA-major). A topology without Core objects
  // (some virtual machines) gets one core per PU.
  const hwloc_obj_type_t core_type =
      hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  const int ncores = hwloc_get_nbobjs_by_type(t, core_type);
  for (int i = 0; i < ncores; ++i) {
    hwloc_obj_t c = hwloc_get_obj_by_type(t, core_type, i);
    Core core;
    core.pus = bitmap_list(c->cpuset);
    if (core.pus.empty()) continue;
    core.package = ancestor_os_index(c, HWLOC_OBJ_PACKAGE);
    for (const auto& n : topo.numa_nodes) {
      if (std::find(n.pus.begin(), n.pus.end(), core.pus.front()) != n.pus.end()) {
        core.numa = n.os_index;
        break;
      }
    }
    topo.cores.push_back(core);
  }
  topo.usable_pus = bitmap_list(hwloc_get_root_obj(t)->cpuset);
  topo.pus = static_cast<int>(topo.usable_pus.size());
  for (auto& n : topo.numa_nodes) std::sort(n.pus.begin(), n.pus.end());
  std::sort(topo.numa_nodes.begin(), topo.numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.os_index < b.os_index; });
  std::sort(topo.packages.begin(), topo.packages.end(),
            [](const Package& a, const Package& b) { return a.os_index < b.os_index; });
}

// The OS devices of a PCI device whose name starts with one of the prefixes, in prefix order.
std::string first_osdev(hwloc_obj_t pci, std::initializer_list<const char*> prefixes) {
  for (const char* prefix : prefixes) {
    for (hwloc_obj_t o = pci->io_first_child; o != nullptr; o = o->next_sibling) {
      if (o->type == HWLOC_OBJ_OS_DEVICE && o->name != nullptr &&
          std::string_view(o->name).starts_with(prefix)) {
        return o->name;
      }
    }
  }
  return "";
}

std::string osdev_name(hwloc_obj_t pci, hwloc_obj_osdev_type_t type) {
  for (hwloc_obj_t o = pci->io_first_child; o != nullptr; o = o->next_sibling) {
    if (o->type == HWLOC_OBJ_OS_DEVICE && o->attr->osdev.type == type && o->name != nullptr) {
      return o->name;
    }
  }
  return "";
}

std::string osdev_info(hwloc_obj_t pci, const char* name) {
  for (hwloc_obj_t o = pci->io_first_child; o != nullptr; o = o->next_sibling) {
    std::string v = info(o, name);
    if (!v.empty()) return v;
  }
  return "";
}

// A GPU is a display-class PCI device (0x03xx) from NVIDIA or AMD, or one carrying a GPU or
// co-processor OS device; BMC VGA chips (ASPEED, Matrox) and NVSwitches are not GPUs.
bool is_gpu(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  if ((a.class_id >> 8) != 0x03) return false;
  if (a.vendor_id == kVendorNvidia || a.vendor_id == kVendorAmd) return true;
  for (hwloc_obj_t o = pci->io_first_child; o != nullptr; o = o->next_sibling) {
    if (o->type == HWLOC_OBJ_OS_DEVICE && (o->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU ||
                                           o->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC)) {
      return true;
    }
  }
  return false;
}

std::string vendor_name(unsigned vendor) {
  if (vendor == kVendorNvidia) return "nvidia";
  if (vendor == kVendorAmd) return "amd";
  if (vendor == kVendorIntel) return "intel";
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%04x", vendor);
  return buf;
}

Gpu make_gpu(hwloc_topology_t t, hwloc_obj_t pci) {
  Gpu g;
  g.busid = busid(pci);
  g.name = first_osdev(pci, {"cuda", "rsmi", "nvml", "ze", "opencl"});
  if (g.name.empty()) g.name = g.busid;
  g.vendor = vendor_name(pci->attr->pcidev.vendor_id);
  g.model = osdev_info(pci, "GPUModel");
  if (g.model.empty()) g.model = pci_model(pci);
  g.numa = numa_of(pci);
  hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(t, pci);
  g.package = ancestor_os_index(local, HWLOC_OBJ_PACKAGE);
  g.local_pus = bitmap_list(local->cpuset);
  return g;
}

// Sorts a NIC into its kind. Slingshot shows up only as a network device (vendor 0x17db);
// EFA, Omni-Path and InfiniBand/RoCE carry an openfabrics device.
NicKind nic_kind(hwloc_obj_t pci, const std::string& openfabrics) {
  const auto& a = pci->attr->pcidev;
  if (a.vendor_id == kVendorHpeCray) return NicKind::kSlingshot;
  if (a.vendor_id == kVendorAmazon && (a.device_id & 0xfff0) == 0xefa0) return NicKind::kEfa;
  if (openfabrics.starts_with("efa")) return NicKind::kEfa;
  if (openfabrics.starts_with("hfi1") || a.class_id == 0x0208) return NicKind::kOmnipath;
  if (openfabrics.empty()) return NicKind::kEthernet;
  return a.class_id == 0x0207 ? NicKind::kInfiniband : NicKind::kRoce;
}

// Link speed in Gbit/s from sysfs (live machine only); 0 when unknown.
double sysfs_link_gbps(const Nic& nic) {
  double v = 0;
  if (nic.kind != NicKind::kEthernet && nic.kind != NicKind::kSlingshot) {
    std::ifstream rate("/sys/class/infiniband/" + nic.name + "/ports/1/rate");
    if (rate >> v && v > 0) return v;  // "100 Gb/sec (4X EDR)"
  }
  if (!nic.netdev.empty()) {
    std::ifstream speed("/sys/class/net/" + nic.netdev + "/speed");
    if (speed >> v && v > 0) return v / 1000.0;  // Mbit/s; -1 when the link is down
  }
  return 0;
}

Nic make_nic(hwloc_obj_t pci, bool live) {
  Nic n;
  const std::string of = osdev_name(pci, HWLOC_OBJ_OSDEV_OPENFABRICS);
  n.netdev = osdev_name(pci, HWLOC_OBJ_OSDEV_NETWORK);
  n.name = of.empty() ? n.netdev : of;
  n.busid = busid(pci);
  n.kind = nic_kind(pci, of);
  n.hpc = n.kind != NicKind::kEthernet;
  n.numa = numa_of(pci);
  n.package = ancestor_os_index(pci, HWLOC_OBJ_PACKAGE);
  n.model = pci_model(pci);
  n.pci_id = pci_id(pci);
  if (live) n.link_gbps = sysfs_link_gbps(n);
  return n;
}

void build_paths(hwloc_topology_t t, Topology& topo, const std::vector<hwloc_obj_t>& gpu_pci,
                 const std::vector<hwloc_obj_t>& nic_pci) {
  const size_t ng = gpu_pci.size(), nn = nic_pci.size();
  topo.gpu_paths.assign(ng, std::vector<Path>(ng));
  topo.gpu_nic_paths.assign(ng, std::vector<Path>(nn));
  topo.nic_paths.assign(nn, std::vector<Path>(nn));
  std::vector<std::string> models;
  for (const auto& g : topo.gpus) models.push_back(g.model);
  const auto nvlinks = nvlink_counts(t, gpu_pci, models);
  topo.has_nvlink = nvlinks.has_value();
  for (size_t i = 0; i < ng; ++i) {
    for (size_t j = 0; j < ng; ++j) {
      const int links = nvlinks ? (*nvlinks)[i][j] : 0;
      topo.gpu_paths[i][j] =
          links > 0 ? Path{PathType::kNvLink, links} : pci_path(gpu_pci[i], gpu_pci[j]);
    }
    for (size_t k = 0; k < nn; ++k) topo.gpu_nic_paths[i][k] = pci_path(gpu_pci[i], nic_pci[k]);
  }
  for (size_t a = 0; a < nn; ++a) {
    for (size_t b = 0; b < nn; ++b) topo.nic_paths[a][b] = pci_path(nic_pci[a], nic_pci[b]);
  }
  // Closest HPC NICs: best class first, then the deepest common ancestor; ties kept together.
  for (size_t i = 0; i < ng; ++i) {
    std::tuple<int, int> best{1 << 20, 0};
    for (size_t k = 0; k < nn; ++k) {
      if (!topo.nics[k].hpc) continue;
      const std::tuple<int, int> key{static_cast<int>(topo.gpu_nic_paths[i][k].type),
                                     -common_depth(gpu_pci[i], nic_pci[k])};
      if (key < best) {
        best = key;
        topo.gpus[i].closest_nics.clear();
      }
      if (key == best) topo.gpus[i].closest_nics.push_back(topo.nics[k].name);
    }
  }
}

void build_devices(hwloc_topology_t t, Topology& topo, bool live) {
  std::vector<std::pair<Gpu, hwloc_obj_t>> gpus;
  std::vector<std::pair<Nic, hwloc_obj_t>> nics;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(t, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(t, pci)) {
    if (is_gpu(pci)) {
      gpus.emplace_back(make_gpu(t, pci), pci);
    } else if (!osdev_name(pci, HWLOC_OBJ_OSDEV_OPENFABRICS).empty() ||
               !osdev_name(pci, HWLOC_OBJ_OSDEV_NETWORK).empty()) {
      nics.emplace_back(make_nic(pci, live), pci);
    }
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const auto& a, const auto& b) { return a.first.busid < b.first.busid; });
  std::sort(nics.begin(), nics.end(), [](const auto& a, const auto& b) {
    return std::tuple(!a.first.hpc, a.first.busid) < std::tuple(!b.first.hpc, b.first.busid);
  });
  std::vector<hwloc_obj_t> gpu_pci, nic_pci;
  for (auto& [g, pci] : gpus) {
    g.index = static_cast<int>(topo.gpus.size());
    const std::string& vendor = g.vendor;  // clang 14 cannot capture a structured binding
    g.vendor_index = static_cast<int>(std::count_if(
        topo.gpus.begin(), topo.gpus.end(), [&](const Gpu& o) { return o.vendor == vendor; }));
    topo.gpus.push_back(g);
    gpu_pci.push_back(pci);
  }
  for (auto& [n, pci] : nics) {
    topo.nics.push_back(n);
    nic_pci.push_back(pci);
  }
  build_paths(t, topo, gpu_pci, nic_pci);
}

}  // namespace

Result<Topology> build_model(hwloc_topology_t t, const std::string& source, bool live) {
  Topology topo;
  topo.source = source;
  build_cpus(t, topo);
  if (topo.pus == 0 || topo.cores.empty()) {
    return invalid_input("'" + source + "' describes no usable processing unit (empty topology)");
  }
  build_devices(t, topo, live);
  DLTUNE_LOG(kDebug, "topo") << source << ": " << topo.packages.size() << " packages, "
                             << topo.numa_nodes.size() << " NUMA nodes, " << topo.cores.size()
                             << " cores, " << topo.pus << " PUs, " << topo.gpus.size() << " GPUs, "
                             << topo.nics.size() << " NICs";
  return topo;
}

}  // namespace dltune::topology::detail
