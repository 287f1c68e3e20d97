// The NCCL communicator's non-blocking point-to-point and split() (NCCL builds only).
//
// A batch of sends and receives is one NCCL group on a stream, followed by a CUDA event; its
// requests are polled: cudaEventQuery says when the group finished on the GPU, and
// ncclCommGetAsyncError whether NCCL failed meanwhile. A request past its deadline aborts the
// communicator (ncclCommAbort ends its kernels, so no rank stays blocked on a dead peer).
#include <algorithm>
#include <mutex>
#include <string>
#include <utility>

#include "comm/nccl_communicator.h"
#include "comm/nccl_impl.h"
#include "comm/request_state.h"

namespace dltune::comm {

struct NcclRequestState final : Request::State {
  ~NcclRequestState() override {
    if (event != nullptr) (void)cudaEventDestroy(event);
  }

  void poll_locked() override {
    if (impl == nullptr || impl->aborted) {
      finish_locked(internal_error(what + ": the NCCL communicator was aborted or destroyed"));
      return;
    }
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) {
      finish_locked(ok_status());
      return;
    }
    if (e != cudaErrorNotReady) {
      finish_locked(internal_error(what + " failed: " + cuda_text(e)));
      return;
    }
    ncclResult_t state = ncclSuccess;
    (void)ncclCommGetAsyncError(impl->comm, &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      std::string msg = what + " failed: " + nccl_text(state, impl->comm);
      ncclCommAbort(impl->comm);
      impl->aborted = true;
      finish_locked(internal_error(msg));
    }
  }

  void expire_locked() override {
    if (impl != nullptr && !impl->aborted) {
      ncclCommAbort(impl->comm);
      impl->aborted = true;
    }
    finish_locked(timeout_error(what +
                                " did not finish in time (a peer rank may have died or not posted "
                                "its half); the NCCL communicator was aborted"));
  }

  cudaEvent_t event = nullptr;
  NcclCommunicator::Impl* impl = nullptr;  // null once the communicator is gone
  std::string what;
};

bool NcclCommunicator::Impl::has_pending_requests() {
  std::lock_guard lock(requests_mu);
  for (const auto& w : requests) {
    auto s = w.lock();
    if (!s) continue;
    std::lock_guard slock(s->mu);
    if (!s->done && cudaEventQuery(s->event) == cudaErrorNotReady) return true;
  }
  return false;
}

void NcclCommunicator::Impl::detach_requests() {
  std::lock_guard lock(requests_mu);
  for (const auto& w : requests) {
    auto s = w.lock();
    if (!s) continue;
    std::lock_guard slock(s->mu);
    if (!s->done) {
      if (cudaEventQuery(s->event) == cudaSuccess) {
        s->finish_locked(ok_status());
      } else {
        s->finish_locked(internal_error(s->what + " was cancelled: the NCCL communicator was "
                                                  "destroyed first"));
      }
    }
    s->impl = nullptr;
  }
  requests.clear();
}

std::vector<Request> NcclCommunicator::post(std::span<const P2pOp> ops, void* stream,
                                            Deadline deadline) {
  auto fail_all = [&](const Error& e) {
    return std::vector<Request>(ops.size(), Request::finished(e));
  };
  std::string what = "ncclSend/ncclRecv group of " + std::to_string(ops.size()) + " (";
  for (size_t i = 0; i < ops.size(); ++i) {
    what += (i ? ", " : "") +
            std::string(ops[i].kind == P2pOp::Kind::kSend ? "send to " : "recv from ") +
            std::to_string(ops[i].peer);
  }
  what += ")";
  if (Status s = impl_->usable(); !s) return fail_all(s.error());
  auto st = std::make_shared<NcclRequestState>();
  if (Status s = cuda_check(cudaEventCreateWithFlags(&st->event, cudaEventDisableTiming),
                            "cudaEventCreateWithFlags");
      !s) {
    return fail_all(s.error());
  }
  auto cs = static_cast<cudaStream_t>(stream);
  Status issued = impl_->issue(
      [&] {
        ncclResult_t r = ncclGroupStart();
        if (r != ncclSuccess) return r;
        for (const P2pOp& op : ops) {
          if (r != ncclSuccess && r != ncclInProgress) break;
          r = op.kind == P2pOp::Kind::kSend
                  ? ncclSend(op.data, op.bytes, ncclInt8, op.peer, impl_->comm, cs)
                  : ncclRecv(op.data, op.bytes, ncclInt8, op.peer, impl_->comm, cs);
        }
        const ncclResult_t end = ncclGroupEnd();
        return r == ncclSuccess || r == ncclInProgress ? end : r;
      },
      what, deadline);
  if (!issued) return fail_all(issued.error());
  if (Status s = cuda_check(cudaEventRecord(st->event, cs), "cudaEventRecord"); !s) {
    return fail_all(s.error());
  }
  st->impl = impl_.get();
  st->what = std::move(what);
  st->polled = true;
  st->deadline = deadline;
  {
    std::lock_guard lock(impl_->requests_mu);
    std::erase_if(impl_->requests,
                  [](const std::weak_ptr<NcclRequestState>& w) { return w.expired(); });
    impl_->requests.push_back(st);
  }
  return std::vector<Request>(ops.size(), Request(st));
}

std::vector<Request> NcclCommunicator::start_batch_on(std::span<const P2pOp> ops, void* stream) {
  return start_batch_on(ops, stream, deadline_from_now());
}

std::vector<Request> NcclCommunicator::start_batch_on(std::span<const P2pOp> ops, void* stream,
                                                      Deadline deadline) {
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool send = ops[i].kind == P2pOp::Kind::kSend;
    if (Status s = check_p2p(ops[i].peer, ops[i].tag, send ? "destination" : "source"); !s) {
      Error e = std::move(s).error().wrap("operation " + std::to_string(i) + " of a batch");
      return std::vector<Request>(ops.size(), Request::finished(e));
    }
  }
  if (ops.empty()) return {};
  return post(ops, stream, deadline);
}

Request NcclCommunicator::isend_on(int dst, int tag, const void* data, size_t bytes, void* stream) {
  const P2pOp op = P2pOp::send(dst, tag, data, bytes);
  return start_batch_on(std::span(&op, 1), stream)[0];
}

Request NcclCommunicator::irecv_on(int src, int tag, void* data, size_t bytes, void* stream) {
  const P2pOp op = P2pOp::recv(src, tag, data, bytes);
  return start_batch_on(std::span(&op, 1), stream)[0];
}

std::vector<Request> NcclCommunicator::start_batch_now(std::span<const P2pOp> ops,
                                                       Deadline deadline) {
  if (impl_->p2p_stream == nullptr) {
    Status s = impl_->usable();
    if (s) {
      s = cuda_check(cudaStreamCreateWithFlags(&impl_->p2p_stream, cudaStreamNonBlocking),
                     "cudaStreamCreateWithFlags");
    }
    if (!s) return std::vector<Request>(ops.size(), Request::finished(s));
  }
  return post(ops, impl_->p2p_stream, deadline);
}

Request NcclCommunicator::start_send(int dst, int tag, const void* data, size_t bytes,
                                     Deadline deadline) {
  const P2pOp op = P2pOp::send(dst, tag, data, bytes);
  return start_batch_now(std::span(&op, 1), deadline)[0];
}

Request NcclCommunicator::start_recv(int src, int tag, void* data, size_t bytes,
                                     Deadline deadline) {
  const P2pOp op = P2pOp::recv(src, tag, data, bytes);
  return start_batch_now(std::span(&op, 1), deadline)[0];
}

Result<std::unique_ptr<Communicator>> NcclCommunicator::split_now(int colour, int key) {
  const Deadline deadline = deadline_from_now();
  auto child = nccl_split(*impl_, colour < 0 ? NCCL_SPLIT_NOCOLOR : colour, key, deadline);
  if (!child) return std::move(child).error();
  if (*child == nullptr) return std::unique_ptr<Communicator>();
  auto impl = std::make_unique<Impl>();
  impl->comm = *child;
  ncclCommUserRank(*child, &impl->rank);
  ncclCommCount(*child, &impl->size);
  impl->device = impl_->device, impl->device_name = impl_->device_name;
  impl->options = impl_->options;
  // From here on the group's destructor cleans up.
  std::unique_ptr<NcclCommunicator> group(new NcclCommunicator(std::move(impl)));
  group->set_timeout(timeout());
  DLTUNE_TRY(cuda_check(cudaStreamCreateWithFlags(&group->impl_->stream, cudaStreamNonBlocking),
                        "cudaStreamCreateWithFlags"));
  DLTUNE_TRY_CTX(group->learn_layout(impl_->node_index, deadline), "learning the group's nodes");
  return std::unique_ptr<Communicator>(std::move(group));
}

// Nodes are numbered in the order of their first member in the group, as the node-leader
// group orders them.
Status NcclCommunicator::learn_layout(int node_index, Deadline deadline) {
  const int n = impl_->size;
  const int me = impl_->rank;
  DLTUNE_TRY(impl_->usable());
  int* dev = nullptr;
  DLTUNE_TRY(cuda_check(cudaMalloc(&dev, sizeof(int) * static_cast<size_t>(n)), "cudaMalloc"));
  struct Free {
    int* p;
    ~Free() { (void)cudaFree(p); }
  } free_dev{dev};
  // On the communicator's stream, so the allgather below reads it: a plain cudaMemcpy runs on
  // the legacy default stream, which a non-blocking stream does not wait for, and may return
  // before its copy from pageable memory has landed.
  DLTUNE_TRY(cuda_check(
      cudaMemcpyAsync(dev + me, &node_index, sizeof(int), cudaMemcpyHostToDevice, impl_->stream),
      "cudaMemcpyAsync"));
  DLTUNE_TRY(impl_->issue(
      [&] { return ncclAllGather(dev + me, dev, 1, ncclInt32, impl_->comm, impl_->stream); },
      "ncclAllGather of the members' nodes", deadline));
  DLTUNE_TRY(synchronize(impl_->stream, deadline));
  std::vector<int> nodes(static_cast<size_t>(n));
  DLTUNE_TRY(
      cuda_check(cudaMemcpy(nodes.data(), dev, sizeof(int) * nodes.size(), cudaMemcpyDeviceToHost),
                 "cudaMemcpy"));
  std::vector<int> order;  // distinct nodes, by first member
  impl_->local_rank = 0;
  for (int r = 0; r < n; ++r) {
    const int node = nodes[static_cast<size_t>(r)];
    if (std::find(order.begin(), order.end(), node) == order.end()) order.push_back(node);
    if (r < me && node == node_index) ++impl_->local_rank;
  }
  impl_->num_nodes = static_cast<int>(order.size());
  impl_->node_index =
      static_cast<int>(std::find(order.begin(), order.end(), node_index) - order.begin());
  return ok_status();
}

}  // namespace dltune::comm
