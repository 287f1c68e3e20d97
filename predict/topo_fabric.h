// A node's links from a topology file, for `dltune predict --topo FILE`: the GPUs (one rank
// each), the bandwidth between two of them, and the node's network bandwidth.
//
// Two formats. An NCCL topology XML (<system>, NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE: GPUs are
// PCI functions of class 0x0300xx / 0x0302xx, NICs of class 0x0200xx / 0x0207xx or <net> elements
// with their speed in Mbit/s, NVLinks as <nvlink count=...> under a <gpu>), or an hwloc XML export
// (<topology>, read by topology/: GPUs, HPC NICs and their link speed when hwloc knows it, the
// NVLink matrix). What a file does not say is taken from the PCI device ids this table knows,
// each with its public specification: A100 SXM4 (10de:20b0, 20b2) and H100 SXM5 (10de:2330) sit
// on NVSwitches at 300 and 450 GB/s a direction, V100 SXM2 (10de:1db1, 1db5) 150, P100 SXM2
// (10de:15f9) 80; an NVLink of sm 60 moves 20 GB/s a direction, later ones 25; AWS EFA
// (1d0f:efa0, efa1, efa2) 100 Gbit/s per adapter; ConnectX-4/-5 (15b3:1013, 1015, 1017, 1019)
// 100, ConnectX-6 (101b, 101d) 200, ConnectX-7 (1021) 400. Without NVLink, GPUs talk over PCIe
// at the link's rate (x16 Gen3 16 GB/s ... Gen5 64 GB/s, as the file gives link_speed). A network
// message costs 10 us on EFA and 5 us elsewhere (an assumption of the model, as the device
// table's fractions are); an NVLink hop 1 us, PCIe 2 us.
#pragma once

#include <string>

#include "common/result.h"

#include "predict/fabric.h"

namespace dltune::predict {

// The share of a network link's line rate collectives reach (NCCL's Simple protocol and the
// network's framing; an assumption of the model, applied to topology files and --inter alike).
inline constexpr double kNetworkEfficiency = 0.9;

// The allreduce model's error on links from specifications (a topology file, a device's
// datasheet): the largest relative error of its bus bandwidth against published nccl-tests
// results of two AWS fabrics that nothing in it was fitted to (bench/predict `fabrics`,
// nccl_tests_err_max = 0.156). predict's intervals take it as the communication's spread there.
inline constexpr double kSpecifiedFabricError = 0.16;

struct NodeTopology {
  std::string format;  // "nccl" or "hwloc"
  int gpus = 0;
  double gpu_link_gbps = 0;  // GPU to GPU, one direction, per GPU
  std::string gpu_link;      // "NVSwitch (A100 SXM4)", "12 NVLinks", "PCIe x16 16 GT/s"
  double nic_gbit = 0;       // the node's network, all NICs together
  int nics = 0;
  std::string nic;  // "4 x AWS EFA 100 Gbit/s"
  double nic_latency_us = 5;
  double gpu_latency_us = 1;
};

// Errors (invalid_input, exit 2): a file that cannot be read, is not XML of either format, or
// holds no GPU.
Result<NodeTopology> load_node_topology(const std::string& path);

// The fabric of such nodes, one rank per GPU: intra from the GPU links, inter the node's
// network shared by its GPUs. Network links reach `network_efficiency` of their line rate.
Fabric fabric_from_topology(const NodeTopology& t, double network_efficiency);

}  // namespace dltune::predict
