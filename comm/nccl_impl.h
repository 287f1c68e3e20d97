// Internal to the NCCL communicator (nccl_communicator.cc, nccl_ops.cc; NCCL builds only): its
// state and the helpers both files use.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "comm/nccl_communicator.h"
#include "common/result.h"

namespace dltune::comm {

// "cudaErrorNoDevice (no CUDA-capable device is detected)".
std::string cuda_text(cudaError_t e);
// ok, or internal "WHAT failed: cuda_text".
Status cuda_check(cudaError_t e, const std::string& what);
// NCCL's error string plus its last error message for `comm` (may be null).
std::string nccl_text(ncclResult_t r, ncclComm_t comm);

// Waits until `comm` has no operation in progress (non-blocking communicators return
// ncclInProgress and finish in the background). On NCCL's error: ncclCommAbort and internal;
// at `deadline`: ncclCommAbort and kTimeout. `*aborted` is set when the communicator is gone.
Status settle(ncclComm_t comm, const std::string& what, Deadline deadline, bool* aborted);

// Serialises the issuing of NCCL operations in this process: NCCL allows no concurrent calls on
// one communicator, nor on communicators of one device, and the communication thread (a
// collective) and the caller's thread (point-to-point) may issue at the same time. Held from
// the first NCCL call of an operation until it settled, never while waiting for the GPU.
std::mutex& nccl_issue_mutex();

struct NcclRequestState;

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  bool aborted = false;
  int rank = 0, size = 1, device = 0;
  int local_rank = 0, node_index = 0, num_nodes = 1;
  std::string device_name;
  NcclOptions options;
  cudaStream_t stream = nullptr;  // the internal stream of the synchronous calls
  bool subs = false;              // local / leaders made
  std::unique_ptr<NcclCommunicator> local, leaders;
  cudaStream_t p2p_stream = nullptr;  // generic isend / irecv (made on first use)
  std::mutex requests_mu;
  std::vector<std::weak_ptr<NcclRequestState>> requests;  // non-blocking operations posted

  // ok when the communicator can take work; makes `device` current on the calling thread.
  Status usable() const;
  // Checks the return code of an NCCL call on `comm`, then waits for it to settle.
  Status finish(ncclResult_t r, const std::string& what, Deadline deadline);
  // Runs `calls` (NCCL calls on `comm`, returning the last result) under the process-wide
  // issue lock, then finish()es them under this communicator's own lock only: no other thread
  // issues on `comm` before it settled, while other communicators stay free meanwhile (a first
  // point-to-point operation settles only once its peer connected).
  template <typename F>
  Status issue(F&& calls, const std::string& what, Deadline deadline) {
    std::lock_guard own(op_mu);
    ncclResult_t r = ncclSuccess;
    {
      std::lock_guard all(nccl_issue_mutex());
      r = calls();
    }
    return finish(r, what, deadline);
  }
  std::mutex op_mu;
  // Whether a non-blocking request posted here has not finished on the GPU yet.
  bool has_pending_requests();
  // Finishes every pending non-blocking request (with its event's state, or an error) and
  // detaches it from this communicator. The destructor calls it once the communicator is
  // finalised or aborted.
  void detach_requests();
};

// Splits `parent` by `color` (NCCL_SPLIT_NOCOLOR: this rank joins none), ranked by `key`, into
// a non-blocking communicator on the same device; nullptr for NOCOLOR. Collective over parent.
Result<ncclComm_t> nccl_split(NcclCommunicator::Impl& parent, int color, int key,
                              Deadline deadline);

}  // namespace dltune::comm
