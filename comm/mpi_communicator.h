// The MPI communicator: dltune's algorithms over Open MPI point-to-point, plus MPI_Allreduce as
// the "native" algorithm. Everything here builds without MPI (DLTUNE_HAVE_MPI == 0): then
// mpi_available() is false and create_mpi_world() returns an unsupported error.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "common/result.h"

namespace dltune::comm {

// True when this build has MPI.
bool mpi_available();
// True when the environment says this process is a rank started by a launcher (Open MPI's
// OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK or Slurm's PMI variables).
bool launched_as_rank();

// Initialises MPI (MPI_Init_thread with MPI_THREAD_MULTIPLE, so that the communication thread
// and the caller's thread may both call MPI) unless already initialised, and returns a
// communicator over a duplicate of MPI_COMM_WORLD with errors returned, not fatal. It holds
// two MPI communicators: one for the collectives and splits, a duplicate for point-to-point
// with user tags (isend / irecv, and send / recv with a user tag). node-local groups come from
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED); split() groups from MPI_Comm_split.
// Errors: unsupported without MPI; internal when MPI cannot provide MPI_THREAD_MULTIPLE (also
// when someone else initialised MPI with a lower level) or MPI_Init fails.
Result<std::unique_ptr<Communicator>> create_mpi_world();
// Finalises MPI if this process initialised it and it is not finalised yet. Call after every
// MPI communicator was destroyed. No-op without MPI.
void mpi_finalize();

}  // namespace dltune::comm
