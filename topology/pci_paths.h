// Internal: path classes between PCI devices of one hwloc topology, and NVLink link counts
// from hwloc's "NVLinkBandwidth" distances matrix.
#pragma once

#include <optional>
#include <vector>

#include <hwloc.h>

#include "topology/topology.h"

namespace dltune::topology::detail {

// The nvidia-smi path class between PCI devices `a` and `b` (kSelf when a == b), from the PCI
// tree: common ancestor a PCI switch with at most one bridge below it on each side -> PIX,
// deeper -> PXB, a host bridge -> PHB, else NODE when both sit in the same single NUMA node,
// else SYS.
Path pci_path(hwloc_obj_t a, hwloc_obj_t b);

// hwloc depth of the deepest common ancestor of a and b (counting from the root, I/O objects
// included); larger is closer. Used to break ties between NICs of the same class.
int common_depth(hwloc_obj_t a, hwloc_obj_t b);

// OS index of the single NUMA node `obj` (any object, I/O included) is local to, or -1 when it
// is local to none or to several.
int numa_of(hwloc_obj_t obj);

// NVLink counts between GPUs (given as their PCI device objects), when the topology carries an
// "NVLinkBandwidth" matrix; nullopt otherwise. links[i][j] is 0 where i and j share no NVLink.
// GPUs linked through NVSwitches get min(links of i, links of j) to the switches, as
// nvidia-smi reports them.
std::optional<std::vector<std::vector<int>>> nvlink_counts(hwloc_topology_t t,
                                                           const std::vector<hwloc_obj_t>& gpus,
                                                           const std::vector<std::string>& models);

}  // namespace dltune::topology::detail
