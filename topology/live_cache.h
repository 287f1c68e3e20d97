// Internal: this boot's hwloc export of the live machine, so that every dltune command after
// the first skips hwloc's discovery. On this VM discovery takes ~18 ms, nearly all of it PCI
// config-space reads that the hypervisor traps one dword at a time; loading the export takes
// ~1 ms. Slurm's slurmd keeps the same kind of export in its spool directory.
//
// An export is used only when its signature matches the machine as it is now: the boot, hwloc's
// version, the CPUs, NUMA nodes and memory online, this process's cgroup and allowed CPUs and
// memory nodes, every PCI device (address, place in the PCI tree, class, IDs) and every network,
// InfiniBand, DRM and DMA device. All of it comes from sysfs and procfs attributes the kernel
// keeps in memory (no config-space read). Anything else (a new OpenCL driver without a reboot)
// is not seen: DLTUNE_TOPO_CACHE=0 turns the cache off.
#pragma once

#include <string>

#include "topology/hwloc_source.h"

namespace dltune::topology::detail {

// The signature described above, one fact per line. Never fails: a file that cannot be read
// is recorded as unreadable, which only makes a match less likely.
std::string live_signature();

// Where the exports live: $XDG_RUNTIME_DIR/dltune when XDG_RUNTIME_DIR is set, else
// /tmp/dltune-UID, created with mode 0700. "" (no cache) when DLTUNE_TOPO_CACHE is 0, when an
// HWLOC_* variable other than HWLOC_HIDE_ERRORS is set (it may change what hwloc discovers), or
// when the directory is not this user's private directory (another owner, group or other access, a
// symbolic link).
std::string cache_dir();

// The live machine's topology: from `dir`'s export for live_signature() when there is one that
// loads, else discovered by open_live() and its export saved there for the next command (best
// effort: a failure to save is logged at debug level, not returned), removing the exports of
// earlier boots. `dir` "" = no cache.
// *from_cache (when not null) says which. Errors: as open_live().
Result<HwlocTopology> open_live_cached(const std::string& dir, bool* from_cache = nullptr);

}  // namespace dltune::topology::detail
