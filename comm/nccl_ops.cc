// The NCCL communicator's operations (comm/nccl_communicator.h), built only with NCCL:
// collectives enqueued on a caller's stream, synchronous point-to-point and allreduce on the
// internal stream, and the node-local / node-leader sub-communicators (ncclCommSplit).
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "comm/nccl_communicator.h"
#include "comm/nccl_impl.h"
#include "common/log.h"

namespace dltune::comm {
namespace {

ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::kF32:
      return ncclFloat32;
    case DataType::kF64:
      return ncclFloat64;
    case DataType::kI32:
      return ncclInt32;
    case DataType::kI64:
      return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

Status check_peer(int peer, int size, const char* role) {
  if (peer < 0 || peer >= size) {
    return invalid_input(std::string(role) + " rank " + std::to_string(peer) +
                         " is outside the NCCL communicator (size " + std::to_string(size) + ")");
  }
  return ok_status();
}

// The synchronous calls below take device buffers "as they are now": a caller that filled them
// with cudaMemcpy / cudaMemset (the legacy default stream, which the communicator's
// non-blocking stream does not wait for, and which may return before a copy from pageable
// memory has landed) is waited for first.
Status after_default_stream() {
  return cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "waiting for the default stream");
}

}  // namespace

Status NcclCommunicator::allreduce_device(const void* send, void* recv, size_t count, DataType type,
                                          ReduceOp op, void* stream) {
  DLTUNE_TRY(impl_->usable());
  return impl_->issue(
      [&] {
        return ncclAllReduce(send, recv, count, nccl_type(type), nccl_op(op), impl_->comm,
                             as_stream(stream));
      },
      "ncclAllReduce of " + std::to_string(count) + " elements", deadline_from_now());
}

Status NcclCommunicator::broadcast_device(void* buf, size_t bytes, int root, void* stream) {
  DLTUNE_TRY(check_peer(root, impl_->size, "broadcast root"));
  DLTUNE_TRY(impl_->usable());
  return impl_->issue(
      [&] {
        return ncclBroadcast(buf, buf, bytes, ncclInt8, root, impl_->comm, as_stream(stream));
      },
      "ncclBroadcast of " + std::to_string(bytes) + " bytes", deadline_from_now());
}

Status NcclCommunicator::synchronize(void* stream, Deadline deadline) {
  DLTUNE_TRY(impl_->usable());
  for (uint64_t polls = 0;; ++polls) {
    cudaError_t e = cudaStreamQuery(as_stream(stream));
    if (e == cudaSuccess) return ok_status();
    if (e != cudaErrorNotReady) {
      return internal_error("waiting for the CUDA stream failed: " + cuda_text(e));
    }
    // Still running: an NCCL error or the deadline aborts the communicator, which also ends
    // its kernels, so no rank stays blocked on a peer that is gone.
    ncclResult_t state = ncclSuccess;
    (void)ncclCommGetAsyncError(impl_->comm, &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      std::string msg = "an NCCL operation failed: " + nccl_text(state, impl_->comm);
      ncclCommAbort(impl_->comm);
      impl_->aborted = true;
      return internal_error(msg);
    }
    if (Clock::now() > deadline) {
      ncclCommAbort(impl_->comm);
      impl_->aborted = true;
      return timeout_error(
          "an NCCL operation did not finish in time (a peer rank may have died); the NCCL "
          "communicator was aborted");
    }
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status NcclCommunicator::send(int dst, int, const void* data, size_t bytes, Deadline deadline) {
  DLTUNE_TRY(check_peer(dst, impl_->size, "destination"));
  DLTUNE_TRY(impl_->usable());
  DLTUNE_TRY(after_default_stream());
  DLTUNE_TRY(
      impl_->issue([&] { return ncclSend(data, bytes, ncclInt8, dst, impl_->comm, impl_->stream); },
                   "ncclSend to rank " + std::to_string(dst), deadline));
  return synchronize(impl_->stream, deadline);
}

Status NcclCommunicator::recv(int src, int, void* data, size_t bytes, Deadline deadline) {
  DLTUNE_TRY(check_peer(src, impl_->size, "source"));
  DLTUNE_TRY(impl_->usable());
  DLTUNE_TRY(after_default_stream());
  DLTUNE_TRY(
      impl_->issue([&] { return ncclRecv(data, bytes, ncclInt8, src, impl_->comm, impl_->stream); },
                   "ncclRecv from rank " + std::to_string(src), deadline));
  return synchronize(impl_->stream, deadline);
}

Status NcclCommunicator::sendrecv(int dst, int, const void* send_data, size_t send_bytes, int src,
                                  int, void* recv_data, size_t recv_bytes, Deadline deadline) {
  DLTUNE_TRY(check_peer(dst, impl_->size, "destination"));
  DLTUNE_TRY(check_peer(src, impl_->size, "source"));
  DLTUNE_TRY(impl_->usable());
  DLTUNE_TRY(after_default_stream());
  DLTUNE_TRY(impl_->issue(
      [&] {
        ncclResult_t r = ncclGroupStart();
        if (r != ncclSuccess) return r;
        r = ncclSend(send_data, send_bytes, ncclInt8, dst, impl_->comm, impl_->stream);
        if (r == ncclSuccess || r == ncclInProgress) {
          r = ncclRecv(recv_data, recv_bytes, ncclInt8, src, impl_->comm, impl_->stream);
        }
        const ncclResult_t end = ncclGroupEnd();
        return r == ncclSuccess || r == ncclInProgress ? end : r;
      },
      "ncclSend/ncclRecv with ranks " + std::to_string(dst) + "/" + std::to_string(src), deadline));
  return synchronize(impl_->stream, deadline);
}

Status NcclCommunicator::native_allreduce(const void* send, void* recv, size_t count, DataType type,
                                          ReduceOp op) {
  DLTUNE_TRY(after_default_stream());
  DLTUNE_TRY(allreduce_device(send, recv, count, type, op, impl_->stream));
  return synchronize(impl_->stream, deadline_from_now());
}

Result<ncclComm_t> nccl_split(NcclCommunicator::Impl& parent, int color, int key,
                              Deadline deadline) {
  DLTUNE_TRY(parent.usable());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t child = nullptr;
  DLTUNE_TRY(parent.issue([&] { return ncclCommSplit(parent.comm, color, key, &child, &config); },
                          "ncclCommSplit", deadline));
  if (child != nullptr) {
    bool aborted = false;
    DLTUNE_TRY(settle(child, "ncclCommSplit", deadline, &aborted));
  }
  return child;
}

Communicator& NcclCommunicator::local() {
  if (!impl_->subs) make_subs();
  return impl_->local ? *impl_->local : *this;
}

Communicator* NcclCommunicator::leaders() {
  if (impl_->size == 1) return this;
  if (!impl_->subs) make_subs();
  return impl_->leaders.get();
}

int NcclCommunicator::node_count() { return impl_->num_nodes; }

void NcclCommunicator::make_subs() {
  impl_->subs = true;
  if (impl_->size == 1) return;
  const Deadline deadline = deadline_from_now();
  auto wrap = [&](ncclComm_t c, int local_rank, int nodes,
                  std::unique_ptr<NcclCommunicator>* into) -> Status {
    auto impl = std::make_unique<Impl>();
    impl->comm = c;
    ncclCommUserRank(c, &impl->rank);
    ncclCommCount(c, &impl->size);
    impl->device = impl_->device, impl->device_name = impl_->device_name;
    impl->local_rank = local_rank, impl->node_index = impl_->node_index;
    impl->num_nodes = nodes, impl->options = impl_->options;
    std::unique_ptr<NcclCommunicator> sub(new NcclCommunicator(std::move(impl)));
    sub->set_timeout(timeout());
    sub->impl_->subs = true;  // no further levels
    DLTUNE_TRY(cuda_check(cudaStreamCreateWithFlags(&sub->impl_->stream, cudaStreamNonBlocking),
                          "cudaStreamCreateWithFlags"));
    *into = std::move(sub);
    return ok_status();
  };
  Status s = [&]() -> Status {
    if (impl_->num_nodes > 1) {
      auto c = nccl_split(*impl_, impl_->node_index, impl_->rank, deadline);
      if (!c) return c.error();
      DLTUNE_TRY(wrap(*c, impl_->local_rank, 1, &impl_->local));
    }
    auto c =
        nccl_split(*impl_, impl_->local_rank == 0 ? 0 : NCCL_SPLIT_NOCOLOR, impl_->rank, deadline);
    if (!c) return c.error();
    if (*c != nullptr) DLTUNE_TRY(wrap(*c, 0, impl_->num_nodes, &impl_->leaders));
    return ok_status();
  }();
  if (!s) {
    DLTUNE_LOG(kError, "nccl") << "splitting the NCCL communicator into node-local and node-leader "
                                  "groups failed: "
                               << s.error().message();
  }
}

}  // namespace dltune::comm
