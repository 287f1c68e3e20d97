// Path classes from the hwloc PCI tree, and NVLink counts from hwloc's NVLinkBandwidth matrix.
//
// nvidia-smi's classes map onto the tree like this (NCCL uses the same reading):
//   PIX  the two devices meet at a PCIe switch: their common ancestor is a PCI-to-PCI bridge
//        and each device is at most one bridge (a switch downstream port) below it;
//   PXB  they meet at a PCI-to-PCI bridge further up (several switches on the way);
//   PHB  they meet at a host bridge;
//   NODE they meet above the PCI tree (no common host bridge) inside one NUMA node;
//   SYS  anything else (the path crosses NUMA nodes or sockets).
// hwloc_get_common_ancestor_obj() compares depths, which are negative virtual depths for I/O
// objects, so the ancestor walk here follows parent pointers instead.
#include "topology/pci_paths.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <unordered_map>

namespace dltune::topology::detail {
namespace {

bool is_bridge(hwloc_obj_t o) { return o->type == HWLOC_OBJ_BRIDGE; }
bool is_host_bridge(hwloc_obj_t o) {
  return is_bridge(o) && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

std::vector<hwloc_obj_t> ancestors(hwloc_obj_t o) {  // o itself first, the root last
  std::vector<hwloc_obj_t> chain;
  for (; o != nullptr; o = o->parent) chain.push_back(o);
  return chain;
}

// The common ancestor and how many objects lie strictly between it and a (resp. b).
struct Meeting {
  hwloc_obj_t ancestor = nullptr;
  int below_a = 0;
  int below_b = 0;
  int depth = 0;  // of the ancestor, counted from the root (root = 0)
};

Meeting meet(hwloc_obj_t a, hwloc_obj_t b) {
  const auto ca = ancestors(a);
  const auto cb = ancestors(b);
  Meeting m;
  for (size_t i = 0; i < ca.size(); ++i) {
    const auto it = std::find(cb.begin(), cb.end(), ca[i]);
    if (it == cb.end()) continue;
    m.ancestor = ca[i];
    m.below_a = static_cast<int>(i) - 1;
    m.below_b = static_cast<int>(it - cb.begin()) - 1;
    m.depth = static_cast<int>(ca.size() - 1 - i);
    return m;
  }
  return m;  // different trees: cannot happen within one topology
}

// Bandwidth per NVLink in hwloc's matrix (MB/s): NVLink 1 (P100) runs 20 GB/s a link, later
// generations as hwloc reports them 25 GB/s. If the values do not divide evenly, their greatest
// common divisor is the best estimate of one link.
uint64_t link_bandwidth(const std::vector<uint64_t>& values,
                        const std::vector<std::string>& models) {
  uint64_t per_link = 25000;
  for (const auto& m : models) {
    if (m.find("P100") != std::string::npos) per_link = 20000;
  }
  uint64_t g = 0;
  bool divisible = true;
  for (uint64_t v : values) {
    if (v == 0) continue;
    g = std::gcd(g, v);
    if (v % per_link != 0) divisible = false;
  }
  return divisible || g == 0 ? per_link : g;
}

}  // namespace

int numa_of(hwloc_obj_t obj) {
  while (obj != nullptr && obj->nodeset == nullptr) obj = obj->parent;  // I/O objects have none
  if (obj == nullptr || hwloc_bitmap_weight(obj->nodeset) != 1) return -1;
  return hwloc_bitmap_first(obj->nodeset);
}

int common_depth(hwloc_obj_t a, hwloc_obj_t b) { return meet(a, b).depth; }

Path pci_path(hwloc_obj_t a, hwloc_obj_t b) {
  if (a == b) return {PathType::kSelf, 0};
  const Meeting m = meet(a, b);
  if (m.ancestor != nullptr && is_bridge(m.ancestor)) {
    if (is_host_bridge(m.ancestor)) return {PathType::kPhb, 0};
    return {m.below_a <= 1 && m.below_b <= 1 ? PathType::kPix : PathType::kPxb, 0};
  }
  if (m.ancestor != nullptr && m.ancestor->type == HWLOC_OBJ_PCI_DEVICE) {
    return {PathType::kPix, 0};  // functions of one device (only reachable via OS devices)
  }
  const int na = numa_of(a);
  return {na >= 0 && na == numa_of(b) ? PathType::kNode : PathType::kSys, 0};
}

std::optional<std::vector<std::vector<int>>> nvlink_counts(hwloc_topology_t t,
                                                           const std::vector<hwloc_obj_t>& gpus,
                                                           const std::vector<std::string>& models) {
  unsigned nr = 1;
  hwloc_distances_s* d = nullptr;
  if (hwloc_distances_get_by_name(t, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0) {
    return std::nullopt;
  }
  const unsigned n = d->nbobjs;
  // Matrix entries are OS devices (nvml0) or PCI devices (NVSwitches) or packages (POWER CPUs).
  std::unordered_map<hwloc_obj_t, size_t> gpu_of_pci;
  for (size_t g = 0; g < gpus.size(); ++g) gpu_of_pci[gpus[g]] = g;
  std::vector<int> row_gpu(n, -1);
  std::vector<bool> is_switch(n, false);
  for (unsigned i = 0; i < n; ++i) {
    hwloc_obj_t o = d->objs[i];
    hwloc_obj_t pci = o->type == HWLOC_OBJ_OS_DEVICE ? o->parent : o;
    const auto it = gpu_of_pci.find(pci);
    if (it != gpu_of_pci.end()) {
      row_gpu[i] = static_cast<int>(it->second);
    } else if (o->type == HWLOC_OBJ_PCI_DEVICE) {
      is_switch[i] = true;
    }
  }
  std::vector<uint64_t> off_diagonal;
  for (unsigned i = 0; i < n; ++i) {
    for (unsigned j = 0; j < n; ++j) {
      if (i != j) off_diagonal.push_back(d->values[i * n + j]);
    }
  }
  const uint64_t per_link = link_bandwidth(off_diagonal, models);
  std::vector<std::vector<uint64_t>> direct(gpus.size(), std::vector<uint64_t>(gpus.size(), 0));
  std::vector<uint64_t> to_switches(gpus.size(), 0);
  for (unsigned i = 0; i < n; ++i) {
    if (row_gpu[i] < 0) continue;
    for (unsigned j = 0; j < n; ++j) {
      if (i == j) continue;
      const uint64_t v = d->values[i * n + j];
      if (row_gpu[j] >= 0) direct[row_gpu[i]][row_gpu[j]] = v;
      if (is_switch[j]) to_switches[row_gpu[i]] += v;
    }
  }
  hwloc_distances_release(t, d);
  std::vector<std::vector<int>> links(gpus.size(), std::vector<int>(gpus.size(), 0));
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = 0; j < gpus.size(); ++j) {
      if (i == j) continue;
      uint64_t bw = direct[i][j];
      if (bw == 0 && to_switches[i] > 0 && to_switches[j] > 0) {
        bw = std::min(to_switches[i], to_switches[j]);
      }
      links[i][j] = static_cast<int>((bw + per_link / 2) / per_link);
    }
  }
  return links;
}

}  // namespace dltune::topology::detail
