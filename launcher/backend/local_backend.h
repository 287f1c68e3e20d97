// The local launch backend: every rank on this machine, as clients of an embedded PMIx
// server (launcher/pmix_server.h), supervised by launcher/supervisor.h.
#pragma once

#include "common/result.h"
#include "launcher/backend/launch_spec.h"

namespace dltune::launcher {

// Starts spec.nranks ranks of spec.argv here, each bound and given its GPU / NIC by
// topology::place() (spec.bind), with RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE and
// the Open MPI direct-launch variables set, and waits for them (see Supervisor's policy).
// A rank that connected to PMIx and exits 0 without PMIx_Finalize, or that calls
// PMIx_Abort / MPI_Abort, counts as failed. Every temporary directory (the PMIx rendezvous,
// Open MPI's session and shared-memory files) is removed before returning.
// Success: the outcome (exit code 0, 1, 130 or 143 and its sentence).
// Failure (nothing is left running): kInvalidInput / kNotFound for a bad spec (validate_spec),
// kUnsupported without PMIx, kIo / kInternal when the server or a fork cannot start.
Result<LaunchOutcome> run_local(const LaunchSpec& spec);

}  // namespace dltune::launcher
