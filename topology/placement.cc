// Rank placement: which GPU, NIC and cores each local rank gets.
//
// Each rank first gets a domain: its GPU's NUMA node (one rank per GPU, ranks beyond the GPU
// count share GPUs in contiguous blocks), else its own NUMA node (when the rank count is a
// multiple of the NUMA node count), else the whole machine (-1). The usable cores of a domain
// are then split into contiguous, near-equal blocks among the ranks in it, in the order of
// their GPUs' locality (else rank order); more ranks than cores split PUs, more ranks than PUs
// share PUs round-robin.
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <map>

#include <sched.h>

#include "topology/topology.h"

namespace dltune::topology {
namespace {

struct Domain {
  std::vector<const Core*> cores;
  std::vector<int> ranks;  // local ranks in it, ascending
};

std::vector<const Core*> cores_of(const Topology& topo, int numa) {
  std::vector<const Core*> out;
  for (const auto& c : topo.cores) {
    if (numa < 0 || c.numa == numa) out.push_back(&c);
  }
  if (out.empty() && numa >= 0) return cores_of(topo, -1);  // a memory-only NUMA node
  return out;
}

std::vector<int> pus_of(const std::vector<const Core*>& cores) {
  std::vector<int> out;
  for (const Core* c : cores) out.insert(out.end(), c->pus.begin(), c->pus.end());
  return out;
}

// The CPUs of the i-th of k ranks sharing `cores` under a core-exclusive policy.
std::vector<int> split_cpus(const std::vector<const Core*>& cores, size_t i, size_t k) {
  const size_t nc = cores.size();
  if (k <= nc) {
    std::vector<const Core*> mine(cores.begin() + i * nc / k, cores.begin() + (i + 1) * nc / k);
    return pus_of(mine);
  }
  const std::vector<int> pus = pus_of(cores);
  const size_t np = pus.size();
  if (np == 0) return {};
  if (k <= np) return std::vector<int>(pus.begin() + i * np / k, pus.begin() + (i + 1) * np / k);
  return {pus[i % np]};
}

int single_numa(const Topology& topo, const std::vector<int>& cpus) {
  int numa = -2;
  for (const auto& c : topo.cores) {
    for (int pu : c.pus) {
      if (!std::binary_search(cpus.begin(), cpus.end(), pu)) continue;
      if (numa != -2 && numa != c.numa) return -1;
      numa = c.numa;
    }
  }
  return numa == -2 ? -1 : numa;
}

// The NIC for a rank: its GPU's closest HPC NICs, handed out round-robin among the GPUs that
// share the same closest set; without a GPU the HPC NICs of its NUMA node, round-robin.
std::string pick_nic(const Topology& topo, int gpu, int numa, int nth_in_domain) {
  if (gpu >= 0) {
    const auto& mine = topo.gpus[gpu].closest_nics;
    if (mine.empty()) return "";
    int before = 0;
    for (int g = 0; g < gpu; ++g) before += topo.gpus[g].closest_nics == mine ? 1 : 0;
    return mine[before % mine.size()];
  }
  std::vector<std::string> local, any;
  for (const auto& n : topo.nics) {
    if (!n.hpc) continue;
    any.push_back(n.name);
    if (numa >= 0 && n.numa == numa) local.push_back(n.name);
  }
  const auto& pool = local.empty() ? any : local;
  return pool.empty() ? "" : pool[nth_in_domain % pool.size()];
}

// Which of topo.numa_nodes each of `n` ranks (a multiple of their count) lives on under `map`.
// kSocket needs every package to hold as many domains; otherwise it is kNuma's round-robin.
std::vector<size_t> rank_domains(const Topology& topo, int n, MapPolicy map) {
  const size_t nnuma = topo.numa_nodes.size();
  const size_t per = static_cast<size_t>(n) / nnuma;  // ranks per domain
  std::vector<std::vector<size_t>> packages;          // each package's domains, in order
  if (map == MapPolicy::kSocket) {
    std::map<int, std::vector<size_t>> by_package;
    for (size_t i = 0; i < nnuma; ++i) by_package[topo.numa_nodes[i].package].push_back(i);
    for (auto& [package, domains] : by_package) packages.push_back(std::move(domains));
    const bool even = std::all_of(packages.begin(), packages.end(), [&](const auto& d) {
      return d.size() * packages.size() == nnuma;
    });
    if (packages.size() == 1) map = MapPolicy::kBlock;
    if (!even) map = MapPolicy::kNuma;
  }
  std::vector<size_t> out(static_cast<size_t>(n));
  for (size_t r = 0; r < out.size(); ++r) {
    if (map == MapPolicy::kBlock) {
      out[r] = r / per;
    } else if (map == MapPolicy::kSocket) {  // the package's j-th rank, its domains in blocks
      out[r] = packages[r % packages.size()][(r / packages.size()) / per];
    } else {
      out[r] = r % nnuma;
    }
  }
  return out;
}

}  // namespace

Result<MapPolicy> parse_map_policy(const std::string& name) {
  if (name == "core" || name == "slot") return MapPolicy::kBlock;
  if (name == "numa") return MapPolicy::kNuma;
  if (name == "socket" || name == "package") return MapPolicy::kSocket;
  return invalid_input("unknown mapping '" + name +
                       "': expected core or slot (consecutive ranks on a NUMA domain), numa "
                       "(round-robin over the NUMA domains) or socket (round-robin over the "
                       "packages)");
}

Result<BindPolicy> parse_bind_policy(const std::string& name) {
  if (name == "auto") return BindPolicy::kAuto;
  if (name == "core") return BindPolicy::kCore;
  if (name == "numa") return BindPolicy::kNuma;
  if (name == "none") return BindPolicy::kNone;
  return invalid_input("unknown binding '" + name + "': expected auto, core, numa or none");
}

Placement place(const Topology& topo, int local_ranks, BindPolicy policy, MapPolicy map) {
  Placement out;
  const int ngpu = static_cast<int>(topo.gpus.size());
  const int nnuma = static_cast<int>(topo.numa_nodes.size());
  int n = local_ranks;
  if (n <= 0) {
    n = ngpu > 0 ? ngpu : std::max(1, nnuma);
    out.rule = ngpu > 0 ? "one rank per GPU (default)"
                        : (nnuma > 1 ? "one rank per NUMA node (default)"
                                     : "one rank (one NUMA node, no GPU)");
  } else if (ngpu > 0) {
    out.rule = std::to_string(n) + " rank(s) on " + std::to_string(ngpu) + " GPU(s)";
  } else if (nnuma > 0 && n % nnuma == 0) {
    out.rule = std::to_string(n) + " rank(s), " + std::to_string(n / nnuma) + " per NUMA node";
  } else {
    out.rule = std::to_string(n) + " rank(s), cores split evenly";
  }
  if (policy == BindPolicy::kAuto) {
    policy = static_cast<size_t>(n) <= topo.cores.size() ? BindPolicy::kCore : BindPolicy::kNuma;
  }
  std::map<int, Domain> domains;
  const std::vector<size_t> by_map =
      ngpu == 0 && nnuma > 0 && n % nnuma == 0 ? rank_domains(topo, n, map) : std::vector<size_t>();
  out.ranks.resize(n);
  for (int r = 0; r < n; ++r) {
    RankPlacement& rp = out.ranks[r];
    rp.local_rank = r;
    int domain = -1;
    if (ngpu > 0) {
      rp.gpu = n <= ngpu ? r : static_cast<int>(static_cast<int64_t>(r) * ngpu / n);
      domain = topo.gpus[rp.gpu].numa;
    } else if (nnuma > 0 && n % nnuma == 0) {
      domain = topo.numa_nodes[by_map[static_cast<size_t>(r)]].os_index;
    }
    domains[domain].ranks.push_back(r);
  }
  for (auto& [numa, d] : domains) {
    d.cores = cores_of(topo, numa);
    // Hand out the blocks in the order of the GPUs' own locality (hwloc may place a GPU
    // closer than its NUMA node, e.g. one L3 of an EPYC), so each block tends to be local.
    auto first_local = [&](int r) {
      const int g = out.ranks[r].gpu;
      return g >= 0 && !topo.gpus[g].local_pus.empty() ? topo.gpus[g].local_pus.front() : -1;
    };
    std::stable_sort(d.ranks.begin(), d.ranks.end(),
                     [&](int a, int b) { return first_local(a) < first_local(b); });
    for (size_t i = 0; i < d.ranks.size(); ++i) {
      RankPlacement& rp = out.ranks[d.ranks[i]];
      if (policy == BindPolicy::kCore) rp.cpus = split_cpus(d.cores, i, d.ranks.size());
      if (policy == BindPolicy::kNuma) rp.cpus = pus_of(d.cores);
      std::sort(rp.cpus.begin(), rp.cpus.end());
      rp.cpuset = cpu_list(rp.cpus);
      rp.numa = numa >= 0 ? numa : single_numa(topo, rp.cpus.empty() ? pus_of(d.cores) : rp.cpus);
      rp.nic = pick_nic(topo, rp.gpu, rp.numa, static_cast<int>(i));
    }
  }
  return out;
}

Status set_affinity(int pid, const std::vector<int>& cpus) {
  if (cpus.empty()) return invalid_input("no CPU to bind to (empty CPU list)");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) {
      return invalid_input("CPU index " + std::to_string(c) + " is out of range (0-" +
                           std::to_string(CPU_SETSIZE - 1) + ")");
    }
    CPU_SET(c, &set);
  }
  if (sched_setaffinity(pid, sizeof set, &set) != 0) {
    return errno_error("cannot bind to CPUs " + cpu_list(cpus));
  }
  return ok_status();
}

}  // namespace dltune::topology
