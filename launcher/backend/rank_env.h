// The conventional environment a rank gets from its launcher, so that a program runs under
// `dltune run` unchanged: PyTorch's env:// rendezvous (what torchrun sets) and Open MPI's
// OMPI_COMM_WORLD_* (what mpirun sets, read by wrapper scripts before MPI_Init).
//
// Both backends use it: the local backend sets the variables when it starts each rank; under
// Slurm, srun starts the ranks, so each task runs `dltune-rank-env PROGRAM ARGS...`, which
// works out the task's identity from srun's SLURM_* variables, sets the same variables and
// execs the program. MASTER_ADDR / MASTER_PORT are job-wide: the launcher chooses them once
// (rendezvous_env) and every rank inherits them.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace dltune::launcher {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// Where one rank stands in the job.
struct RankIdentity {
  int rank = 0;        // 0..size-1
  int size = 1;        // ranks in the job
  int local_rank = 0;  // 0..local_size-1 on its node
  int local_size = 1;  // ranks on its node
  int node = 0;        // the node's index, 0..nodes-1 (torchrun's GROUP_RANK)
  int nodes = 1;
};

// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE (torchrun's
// names) and OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, _NODE_RANK (mpirun's).
EnvList rank_identity_env(const RankIdentity& id);

// MASTER_ADDR and MASTER_PORT for PyTorch's env:// rendezvous: the address every rank can
// reach rank 0's node at, and a port free there, chosen once per job.
EnvList rendezvous_env(const std::string& master_addr, int master_port);

// How many threads a rank's OpenMP and BLAS libraries should start, as torchrun sets
// OMP_NUM_THREADS (issue 39: two PyTorch ranks on two cores each started two threads): the CPUs
// the rank is bound to (`bound_cpus` > 0); unbound, the node's `usable_cpus` shared among its
// `local_size` ranks; at least 1. Returned as OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
// MKL_NUM_THREADS, to be set only where the user has not set them.
EnvList thread_env(int bound_cpus, int usable_cpus, int local_size);

// "2(x3),1" (Slurm's SLURM_STEP_TASKS_PER_NODE) -> {2, 2, 2, 1}. Failure: kInvalidInput for
// anything else (empty, a zero count, a malformed repeat).
Result<std::vector<int>> parse_tasks_per_node(std::string_view text);

// A task's identity from srun's variables, read through `get` (nullptr when unset):
// SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID and the step's SLURM_STEP_NUM_TASKS,
// SLURM_STEP_NUM_NODES, SLURM_STEP_TASKS_PER_NODE (the job's SLURM_NTASKS, SLURM_NNODES,
// SLURM_TASKS_PER_NODE when the step's are missing). Failure: kInvalidInput naming the
// variable that is missing or not a number, or ids that do not fit together.
Result<RankIdentity> identity_from_slurm(const std::function<const char*(const char*)>& get);

// The first host of a Slurm host list: "n[01-04,7],gpu3" -> "n01". Failure: kInvalidInput.
Result<std::string> first_host(std::string_view hostlist);

// A TCP port that nothing listens on at `address` (an IPv4 or IPv6 literal of this machine;
// 0.0.0.0: free on every IPv4 address)
// right now: the kernel's pick for a socket bound to port 0 there. Failure: kIo when
// `address` is not one of this machine's (EADDRNOTAVAIL) or the socket calls fail.
Result<int> free_tcp_port(const std::string& address);

}  // namespace dltune::launcher
