// The machine model: what dltune knows about one node, from hwloc 2 (live) or an hwloc XML
// export, plus the views derived from it (path classes, closest NICs, rank placement and the
// fingerprint).
//
//   auto topo = topology::discover_default();     // DLTUNE_TOPO_XML, else the live machine
//   if (!topo) return topo.error().wrap("discovering the node");
//   auto plan = topology::place(*topo, 0, topology::BindPolicy::kAuto);
//   for (const auto& r : plan.ranks) { ... r.cpus, r.gpu, r.nic ... }
//
// A Topology is plain data: copyable, comparable, free of hwloc handles. Indexes that the
// operating system uses (PU, NUMA node and package OS indexes) are kept as the OS gives them:
// they need not be contiguous (Lassen's NUMA nodes are 0 and 8).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

struct hwloc_topology;  // hwloc's loaded topology (hwloc_topology_t); opaque outside topology/

namespace dltune::topology {

struct Package {
  int os_index = -1;
  std::string cpu_model;  // hwloc's CPUModel info, "" when the source has none
  int cores = 0;          // usable cores in this package
  int pus = 0;            // usable PUs in this package
  bool operator==(const Package&) const = default;
};

struct NumaNode {
  int os_index = -1;
  int package = -1;  // OS index of the package holding it, -1 when none does
  uint64_t memory_bytes = 0;
  std::vector<int> pus;  // usable PU OS indexes, ascending
  bool operator==(const NumaNode&) const = default;
};

struct Core {
  int numa = -1;         // OS index of its NUMA node, -1 when unknown
  int package = -1;      // OS index of its package, -1 when unknown
  std::vector<int> pus;  // usable PU OS indexes of this core, ascending (never empty)
  bool operator==(const Core&) const = default;
};

struct Gpu {
  int index = 0;         // position among all GPUs, in PCI bus-id order (nvidia-smi's order)
  int vendor_index = 0;  // position among GPUs of the same vendor: the CUDA_VISIBLE_DEVICES
                         // (with CUDA_DEVICE_ORDER=PCI_BUS_ID) or ROCR_VISIBLE_DEVICES index
  std::string name;      // preferred OS device (cuda0, rsmi0, nvml0, opencl0d0), else busid
  std::string busid;     // "0004:04:00.0"
  std::string vendor;    // "nvidia", "amd" or the PCI vendor id "0x1234"
  std::string model;     // "Tesla V100-SXM2-16GB"; PCI device name or ids when unknown
  int numa = -1;         // OS index of the closest NUMA node, -1 when not local to one
  int package = -1;      // OS index of the package, -1 when unknown
  std::vector<std::string> closest_nics;  // HPC NIC names at the best path class (ties kept)
  std::vector<int> local_pus;             // usable PUs local to the GPU's PCI locality
  bool operator==(const Gpu&) const = default;
};

enum class NicKind { kInfiniband, kRoce, kOmnipath, kEfa, kSlingshot, kEthernet };

struct Nic {
  std::string name;    // openfabrics name (mlx5_0, hfi1_0, rdmap197s0) else netdev (hsi0)
  std::string netdev;  // network interface on the same PCI function, "" when none
  std::string busid;
  NicKind kind = NicKind::kEthernet;
  bool hpc = false;  // used for HPC traffic (everything but plain Ethernet)
  int numa = -1;
  int package = -1;
  std::string model;     // PCI device name, else "[vendor:device]"
  std::string pci_id;    // "15b3:1019"
  double link_gbps = 0;  // network link speed in Gbit/s; 0 when the source does not give it
  bool operator==(const Nic&) const = default;
};

// Path classes with nvidia-smi `topo -m` semantics.
enum class PathType {
  kSelf,    // X
  kNvLink,  // NV# (count in Path::links)
  kPix,     // at most one PCIe switch between the two devices
  kPxb,     // several PCIe switches, no host bridge
  kPhb,     // through a PCIe host bridge (the same one)
  kNode,    // different host bridges within one NUMA node
  kSys,     // across NUMA nodes (the SMP interconnect)
};

struct Path {
  PathType type = PathType::kSys;
  int links = 0;  // NVLink count for kNvLink
  // "X", "NV6", "PIX", "PXB", "PHB", "NODE", "SYS".
  std::string str() const;
  bool operator==(const Path&) const = default;
};

struct Topology {
  std::string source;                            // "live" or the XML path it was loaded from
  std::vector<Package> packages;                 // ordered by OS index
  std::vector<NumaNode> numa_nodes;              // ordered by OS index
  std::vector<Core> cores;                       // usable cores, topology order (NUMA-major)
  int pus = 0;                                   // usable PUs
  std::vector<int> usable_pus;                   // ascending OS indexes
  std::vector<Gpu> gpus;                         // by index
  std::vector<Nic> nics;                         // HPC NICs first, then by PCI bus id
  std::vector<std::vector<Path>> gpu_paths;      // [gpu][gpu]
  std::vector<std::vector<Path>> gpu_nic_paths;  // [gpu][nic]
  std::vector<std::vector<Path>> nic_paths;      // [nic][nic]
  bool has_nvlink = false;                       // an NVLinkBandwidth matrix was present

  int hpc_nic_count() const;
  bool operator==(const Topology&) const = default;
};

// --- sources --------------------------------------------------------------------------

// Discovers this machine with hwloc 2, I/O devices included.
// Fails (kInternal) only when hwloc itself cannot build a topology.
Result<Topology> discover();

// Loads an hwloc 2 XML export. Fails with kNotFound when the file does not exist and with
// kInvalidInput, in one sentence naming the file, when it cannot be read (a directory, no
// permission), is empty, not XML, truncated or malformed, an hwloc 3 export, or describes no
// usable processing unit. Sets HWLOC_HIDE_ERRORS=2 (unless already set) so that hwloc does
// not print its own lines next to that sentence.
Result<Topology> load_xml(const std::string& path);

// Loads an hwloc 2 XML export held in `xml` (another machine's, as its `dltune topo --export`
// printed it); `source` becomes Topology::source and names it in errors. Errors as load_xml()'s
// for the text (kInvalidInput).
Result<Topology> load_xml_text(const std::string& xml, const std::string& source);

// hwloc's XML export of what discover_default() describes: the text of $DLTUNE_TOPO_XML when
// that variable is set (checked to load), else this machine's live topology exported. Errors:
// load_xml()'s, discovery's, hwloc's export failing (kInternal).
Result<std::string> export_default_xml();

// The topology dltune should use: load_xml($DLTUNE_TOPO_XML) when that variable is set,
// else discover().
Result<Topology> discover_default();

// discover(), keeping hwloc's loaded topology for a library that takes one instead of
// discovering the machine a second time (a PMIx server: PMIX_TOPOLOGY2). The handle lives as
// long as a copy of `hwloc` does. Failure: as discover().
struct LiveDiscovery {
  Topology model;
  std::shared_ptr<hwloc_topology> hwloc;  // null when the model is not this machine's
};
Result<LiveDiscovery> discover_keeping_hwloc();
// As discover_default(): with DLTUNE_TOPO_XML the export's model and no handle (an export
// describes another machine), else discover_keeping_hwloc().
Result<LiveDiscovery> discover_default_keeping_hwloc();

// --- placement ------------------------------------------------------------------------

enum class BindPolicy {
  kAuto,  // kCore when every rank can get its own core, else kNuma
  kCore,  // disjoint sets of whole cores (PUs when ranks outnumber cores)
  kNuma,  // every PU of the rank's NUMA node (ranks on one node share them)
  kNone,  // no CPU binding: cpus stays empty (GPU and NIC are still assigned)
};

// Parses "auto", "core", "numa", "none". Error (kInvalidInput) names the accepted values.
Result<BindPolicy> parse_bind_policy(const std::string& name);

// How a node's ranks are dealt over its NUMA domains (mpirun's --map-by), when there are as
// many ranks per domain on every domain (no GPU: GPU r is rank r's whatever the mapping):
//   kBlock   consecutive ranks fill a domain, then the next (mpirun's core / slot): 4 ranks on
//            2 domains: 0 1 | 2 3;
//   kNuma    round-robin over the NUMA domains: 0 2 | 1 3;
//   kSocket  round-robin over the packages, a package's ranks over its domains in blocks
//            (2 packages of 2 domains, 8 ranks: 0 2 | 4 6 || 1 3 | 5 7); kBlock on one package.
// Within a domain the ranks take its cores in rank order, as kBlock's do.
enum class MapPolicy { kBlock, kNuma, kSocket };

// Parses mpirun's --map-by words: "core", "slot" (kBlock), "numa", "socket" / "package".
// Errors (kInvalidInput): anything else, naming the accepted words (hwthread, l3cache, node,
// ppr:... have no dltune mapping).
Result<MapPolicy> parse_map_policy(const std::string& name);

struct RankPlacement {
  int local_rank = 0;
  std::vector<int> cpus;  // PU OS indexes to bind to, ascending; empty = do not bind
  std::string cpuset;     // the same as a Linux CPU list: "8-11,16"; "" when cpus is empty
  int gpu = -1;           // Gpu::index, -1 when none
  std::string nic;        // Nic::name, "" when none
  int numa = -1;          // OS index of the NUMA node the rank lives on, -1 when unknown
};

struct Placement {
  std::vector<RankPlacement> ranks;
  std::string rule;  // why this many ranks / this shape, e.g. "one rank per GPU"
};

// Places `local_ranks` ranks on the node (0 = the default count: one per GPU, else one per
// NUMA node). GPU r goes to rank r (ranks beyond the GPU count share GPUs in contiguous
// blocks); each rank gets cores local to its GPU's NUMA node (or of its NUMA node when there
// is no GPU), split evenly among the ranks there, and its GPU's closest HPC NIC (tied NICs
// are handed out round-robin). Explicit counts that match neither split all usable cores
// evenly. `map` deals the ranks over the NUMA domains (MapPolicy). Never fails: negative counts
// are treated as 0; a topology without PUs gets ranks without CPU binding.
Placement place(const Topology& topo, int local_ranks, BindPolicy policy,
                MapPolicy map = MapPolicy::kBlock);

// Binds thread/process `pid` (0 = the calling thread) to `cpus` with sched_setaffinity.
// Fails with kInvalidInput for an empty list or an index out of range, kIo when the kernel
// refuses (the errno text is included).
Status set_affinity(int pid, const std::vector<int>& cpus);

// Environment variables that make a rank use its placement's GPU and NIC:
// CUDA_DEVICE_ORDER + CUDA_VISIBLE_DEVICES (NVIDIA) or ROCR_VISIBLE_DEVICES (AMD), and for the
// NIC NCCL_IB_HCA / UCX_NET_DEVICES / OMPI_MCA_btl_openib_if_include (InfiniBand, RoCE),
// FI_PROVIDER (EFA: efa, Slingshot: cxi), NCCL_SOCKET_IFNAME / OMPI_MCA_btl_tcp_if_include
// (a NIC with a network interface). Empty when the rank has neither.
std::vector<std::pair<std::string, std::string>> rank_env(const Topology& topo,
                                                          const RankPlacement& rank);

// --- derived views --------------------------------------------------------------------

// The Linux CPU-list form of ascending or unsorted indexes: {0,1,2,5} -> "0-2,5".
std::string cpu_list(std::vector<int> cpus);

// "infiniband", "roce", "omnipath", "efa", "slingshot", "ethernet".
const char* nic_kind_name(NicKind kind);

// SHA-256 (64 hex characters) of a canonical description of what matters for tuning: CPU
// model, package/NUMA/core/PU counts, GPU models with their NUMA placement, NIC kinds and
// models, the path-class matrices and NVLink counts. Never host names, serial numbers,
// addresses, bus ids or dates: two identical nodes give the same value.
std::string fingerprint(const Topology& topo);
// The canonical text fingerprint() hashes (for tests and `--json`).
std::string fingerprint_text(const Topology& topo);

// --- rendering ------------------------------------------------------------------------

// The readable summary: CPUs, GPUs, NICs, the matrix, the placement.
std::string render_text(const Topology& topo, const Placement& placement);
// The GPU/NIC matrix in nvidia-smi `topo -m` layout with its legend; "" when no GPU or NIC.
std::string render_matrix(const Topology& topo);
// The JSON model (packages, numa_nodes, cores, pus, gpus, nics, gpu_paths, gpu_nic_paths,
// placement, fingerprint, ...) as text, indented by `indent` spaces (-1 = one line).
std::string render_json(const Topology& topo, const Placement& placement, int indent = 2);

}  // namespace dltune::topology
