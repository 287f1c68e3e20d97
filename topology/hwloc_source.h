// Internal: the hwloc side of topology/. An RAII handle for hwloc_topology_t and the two ways
// of filling it (live discovery, an XML export), both with I/O devices kept.
// Both keep hwloc's GL plugin from loading (hwloc_source.cc: kUnusedPlugins) unless
// the user set HWLOC_PLUGINS_BLACKLIST; to do so they set and unset that variable, so call them
// before starting threads that read the environment (dltune discovers the machine first).
#pragma once

#include <memory>
#include <string>

#include <hwloc.h>

#include "common/result.h"
#include "topology/topology.h"

namespace dltune::topology::detail {

struct HwlocDeleter {
  void operator()(hwloc_topology_t t) const { hwloc_topology_destroy(t); }
};
// Owns a loaded hwloc topology; destroyed with hwloc_topology_destroy.
using HwlocTopology = std::unique_ptr<hwloc_topology, HwlocDeleter>;

// Loads the live machine. Fails (kInternal) when hwloc cannot.
Result<HwlocTopology> open_live();

// Loads an export of this machine that dltune itself wrote (topology/live_cache.h) as this
// machine's topology: binding through it works as with open_live(). Fails (kInvalidInput) when
// hwloc rejects the text.
Result<HwlocTopology> open_export_of_this_system(const std::string& xml);

// hwloc's XML export of `t`. Fails (kInternal) when hwloc cannot write it.
Result<std::string> export_xml(hwloc_topology_t t);

// Parses an XML export held in `xml`; `path` only names it in errors. Fails with
// kInvalidInput (one sentence) for empty, non-XML, hwloc 3, truncated or malformed text.
Result<HwlocTopology> open_xml_text(const std::string& xml, const std::string& path);

// Builds the plain model from a loaded topology (topology/build.cc). `live` enables sysfs
// reads for NIC link speeds. Fails (kInvalidInput) when the topology has no usable PU.
Result<Topology> build_model(hwloc_topology_t t, const std::string& source, bool live);

}  // namespace dltune::topology::detail
