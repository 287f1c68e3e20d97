// Cross-memory attach (CMA): Linux's process_vm_readv / process_vm_writev, which copy between
// this process's memory and another process's in one copy, the kernel pinning the other side's
// pages. Open MPI's shared-memory transport (btl/vader) uses it for large messages; dltune's
// 'cma' allreduce (comm/algo_cma.cc) uses it to reduce the ranks' own private buffers with no
// staging copy.
//
// The kernel allows it only where the caller may ptrace the target (same user and, under
// Yama's ptrace_scope 1, a target that named the caller or any process its tracer; scope 2
// needs CAP_SYS_PTRACE, scope 3 forbids it), where no seccomp filter (a container's) refuses
// the calls, and where both processes see the same process ids (one PID namespace). So a
// node-local group probes it once, on the first 'cma' allreduce (CmaPeers below): every rank
// reads and writes every peer's probe word, and the group uses CMA only when every rank could.
// Otherwise the 'cma' allreduce falls back to the shared-memory staging of 'shm', and the
// lowest refusing local rank says why, once per process, in the log (subsystem "comm").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include "comm/communicator.h"
#include "common/result.h"

namespace dltune::comm {

// What a node-local group found when it probed cross-memory attach.
struct CmaPeers {
  bool usable = false;      // every local rank may read and write every other's memory
  std::string reason;       // when !usable: why, as the lowest refusing local rank saw it
  std::vector<pid_t> pids;  // local rank -> its process id (usable only)
  uint64_t probe_word = 0;  // what peers read and write back during the probe
};

namespace cma {

// Copies `bytes` from address `remote` of process `pid` into `local` (read) or from `local` to
// `remote` (write), in as many system calls as the kernel needs (it may copy less than asked).
// Errors: io_error naming the call, the pid and errno (EPERM: not allowed; ESRCH: no such
// process; EFAULT: an address outside the other process's mappings).
Status read(pid_t pid, void* local, const void* remote, size_t bytes);
Status write(pid_t pid, void* remote, const void* local, size_t bytes);

// Bytes this process has asked read() and write() to copy so far (what registered memory,
// comm/registration.h, saves shows here).
uint64_t copied_bytes();

// Collective over `local` (a node-local group, every rank calling it): probes cross-memory
// attach between its ranks as the file header says and returns what they agreed, the same on
// every rank. Refusals are no error: they come back as usable == false with the reason, and
// are logged once per process. Errors: invalid input when DLTUNE_COMM_CMA is neither 'auto'
// nor 'off'; timeouts and peer errors of the exchange with the other local ranks.
Result<std::shared_ptr<CmaPeers>> probe(Communicator& local, Deadline deadline);

// Test hook: when set, called with the local rank before it probes each peer; a non-zero
// return is taken as the errno of a refused process_vm_readv (e.g. EPERM), as if the kernel
// had refused it. Set before the ranks start, reset (nullptr) after. Each call also lets the
// next probe's outcome be logged again (the log says each outcome once per process).
void set_probe_fault(std::function<int(int local_rank)> fault);

}  // namespace cma
}  // namespace dltune::comm
