// Checking an hwloc XML export before hwloc 2.9 reads it. hwloc trusts its input: an export
// with one `complete_cpuset` attribute deleted crashes it (SIGSEGV in libhwloc, lstopo too),
// in `dltune topo --xml`, in the NCCL plugin's host and, through DLTUNE_TOPO_XML, in
// slurmstepd. So every export dltune reads passes this check first, which does not depend on
// hwloc parsing anything: a bounded XML scan (xml_scan.h) plus hwloc's own invariants.
//
// What is checked, besides well-formed XML (UTF-8, balanced tags, no entity declarations):
//   - the document element is <topology>, with one root <object> of type Machine (or System);
//   - every <object> has a known type; objects of the CPU and memory side (Machine, Package,
//     Die, Group, caches, Core, PU, NUMANode, MemCache) carry cpuset, complete_cpuset,
//     nodeset and complete_nodeset, each a well-formed hwloc bitmap ("0x000000ff,0xffffffff",
//     optionally after "0xf...f"), with cpuset within complete_cpuset, nodeset within
//     complete_nodeset, and all four within the parent's;
//   - a PU has an os_index and a complete_cpuset of exactly that PU; a NUMANode has an
//     os_index within its complete_nodeset; indexes are decimal and below 2^32;
//   - I/O objects (Bridge, PCIDev, OSDev) and Misc hold no CPU-side or memory object.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "topology/xml_scan.h"

namespace dltune::topology {

// Ok when `xml` passes every check above. Otherwise invalid_input, one sentence naming `path`,
// the line and what is wrong, e.g. "'x.xml' is not a valid hwloc XML export: line 4: the
// Machine object has no complete_cpuset attribute; export it again with `lstopo --of xml`".
Status check_hwloc_xml(std::string_view xml, const std::string& path, const XmlLimits& limits = {});

}  // namespace dltune::topology
