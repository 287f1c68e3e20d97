// Loading a topology in a child process, for hosts that must not die: slurmstepd (the SPANK
// plugin) and a user's training job (the NCCL tuner plugin). hwloc runs in the helper program
// dltune-topo-probe (topology/tools/topo_probe.cc) under CPU, memory and core-file limits, with
// a fixed environment and, when asked, as another user; its model comes back over a pipe as
// JSON (model_json.h). A crash, a hang or garbage in the child is an error here, never a
// crash of the host.
//
// Only async-signal-safe calls run between fork and exec, so the host may be multi-threaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "common/result.h"
#include "topology/topology.h"

namespace dltune::topology {

struct IsolatedLoad {
  std::string helper;                         // absolute path of dltune-topo-probe
  std::string xml_path;                       // the export to load; "" = discover this machine
  std::vector<std::string> env;               // the child's whole environment, NAME=value
  int timeout_ms = 15000;                     // wall time before the child is killed
  int cpu_seconds = 10;                       // RLIMIT_CPU
  uint64_t memory_bytes = uint64_t{2} << 30;  // RLIMIT_AS (not applied under AddressSanitizer)
  // When set (the caller's real uid must be 0; its effective uid may be lowered already, as in
  // slurmstepd), the child drops real, effective and saved ids and its
  // supplementary groups to these before exec.
  std::optional<std::pair<uid_t, gid_t>> run_as;
};

// Runs the helper and returns its model. Errors: invalid_input when the export is bad (the
// helper's own sentence) or made the helper crash or run out of its limits while loading an
// export (the XML is then what is wrong); internal_error for a failure to start the helper,
// a crash while discovering this machine, or an answer that is not a model; timeout_error
// when it ran past timeout_ms (it is killed).
Result<Topology> load_isolated(const IsolatedLoad& request);

// `name` in the bin/ directory beside the lib/ directory of the shared object (or program)
// that contains this code: where a plugin finds dltune's helper programs. "" when unknown.
std::string sibling_bin(const std::string& name);

}  // namespace dltune::topology
