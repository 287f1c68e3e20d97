// `dltune-worker profile --copies N`: the profile as N ranks of a node run it, at the same time,
// so that what they share (memory bandwidth, caches, SMT siblings' execution units) slows the
// profile as it slows the job's ranks (issue 42: one rank alone predicted resnet20 b64 on this
// 2-core machine at 995 samples/s for 2 ranks; the 2 ranks trained at 674).
//
// How: the parent forks N children. Child i binds to the i-th of N equal blocks of the parent's
// CPUs (all of them when there are fewer CPUs than copies) and executes this program again with
// the parent's arguments less --copies and --out, plus --barrier R,W and an --out of its own.
// Each copy builds its model and runs its untimed warm-up steps, then writes one byte to W and
// waits for one on R; once every copy has written, the parent writes N bytes, so the copies' timed
// steps start together and overlap. A copy that exits before the barrier ends the wait (the parent
// polls its children) and the profile fails naming it. The result is the slowest copy's profile
// (a data-parallel step waits for its slowest rank), with "copies": N and "copy_step_s": every
// copy's median step seconds.
#pragma once

#include <string>

#include "common/result.h"

namespace dltune::engine {

// Runs `copies` (>= 2) copies of this process's profile command as above and writes the result
// to `out` ("" standard output). Errors: fork or pipe failure (internal), a copy that failed
// (peer_failed, with its exit code; invalid_input where it exited 2).
Status profile_copies(int copies, const std::string& out);

// The barrier a copy waits at (--barrier R,W): writes one byte to W, then reads one from R.
// Errors: a malformed "R,W" (invalid_input); the pipe closed before the parent released it.
Status wait_at_barrier(const std::string& fds);

}  // namespace dltune::engine
