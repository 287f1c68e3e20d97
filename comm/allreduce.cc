// allreduce() / broadcast(): validation, dispatch to the algorithms, and the non-blocking
// forms on the communicator's communication thread.
#include "comm/allreduce.h"

#include <cstring>
#include <limits>
#include <string>

#include "comm/algorithms.h"

namespace dltune::comm {
namespace detail {

void copy_if_needed(const Call& c) {
  if (c.send != c.recv) std::memcpy(c.recv, c.send, c.count * c.esize);
}

Status ring_allgather(Communicator& comm, const void* mine, size_t bytes, void* all, int tag,
                      Deadline deadline) {
  const int n = comm.size(), me = comm.rank();
  auto* out = static_cast<uint8_t*>(all);
  std::memcpy(out + static_cast<size_t>(me) * bytes, mine, bytes);
  for (int s = 1; s < n; ++s) {
    const int to = (me + s) % n, from = (me - s + n) % n;
    DLTUNE_TRY(comm.sendrecv(to, tag, mine, bytes, from, tag,
                             out + static_cast<size_t>(from) * bytes, bytes, deadline));
  }
  return ok_status();
}

Status run_algorithm(Algorithm a, const Call& c) {
  switch (a) {
    case Algorithm::kRing:
      return ring(c);
    case Algorithm::kRecursiveDoubling:
      return recursive_doubling(c);
    case Algorithm::kRabenseifner:
      return rabenseifner(c);
    case Algorithm::kTree:
      return tree(c);
    case Algorithm::kHierarchical:
      return hierarchical(c);
    case Algorithm::kShm:
      return shm(c);
    case Algorithm::kCma:
      return cma(c);
    case Algorithm::kNative:
      return c.comm.native_allreduce(c.send, c.recv, c.count, c.type, c.op);
    default:  // NCCL's: an NCCL communicator runs them (comm/nccl_communicator.h)
      break;
  }
  return unsupported("allreduce algorithm '" + std::string(algorithm_name(a)) +
                     "' is NCCL's: it runs on an NCCL communicator, not on host memory");
}

}  // namespace detail

namespace {

Status validate(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
                const AllreduceOptions& o) {
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    return invalid_input("null buffer for " + std::to_string(count) + " elements");
  }
  if (count > std::numeric_limits<size_t>::max() / 16 / dtype_size(type)) {
    return invalid_input("element count " + std::to_string(count) + " is too large");
  }
  if ((o.algorithm == Algorithm::kShm || o.algorithm == Algorithm::kCma) && comm.node_count() > 1) {
    return invalid_input("the '" + std::string(algorithm_name(o.algorithm)) +
                         "' algorithm works within one node, but this communicator spans " +
                         std::to_string(comm.node_count()) + " nodes; use 'hier'");
  }
  if (o.algorithm == Algorithm::kHierarchical) {
    if (o.inner == Algorithm::kHierarchical || o.inner == Algorithm::kNative) {
      return invalid_input(
          "hierarchical: the node-local algorithm must be shm, cma, tree, ring, rd "
          "or rabenseifner, got '" +
          std::string(algorithm_name(o.inner)) + "'");
    }
    if (o.outer == Algorithm::kHierarchical || o.outer == Algorithm::kShm ||
        o.outer == Algorithm::kCma) {
      return invalid_input(
          "hierarchical: the algorithm among node leaders must be flat (ring, "
          "rd, rabenseifner, tree or native), got '" +
          std::string(algorithm_name(o.outer)) + "'");
    }
  }
  return ok_status();
}

std::string describe_call(Communicator& comm, size_t count, DataType type,
                          const AllreduceOptions& o) {
  return "allreduce '" + std::string(algorithm_name(o.algorithm)) + "' of " +
         std::to_string(count) + " " + std::string(dtype_name(type)) + " on " + comm.describe();
}

Status allreduce_now(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
                     ReduceOp op, const AllreduceOptions& o) {
  DLTUNE_TRY_CTX(validate(comm, send, recv, count, type, o), describe_call(comm, count, type, o));
  if (count == 0) return ok_status();
  const auto timeout = o.timeout.count() > 0 ? o.timeout : comm.timeout();
  const detail::Call call{
      comm, send, recv, count, type, op, dtype_size(type), coarse_deadline(timeout), o};
  DLTUNE_TRY_CTX(detail::run_algorithm(o.algorithm, call), describe_call(comm, count, type, o));
  return ok_status();
}

Status broadcast_now(Communicator& comm, void* data, size_t bytes, const BroadcastOptions& o) {
  if (o.root < 0 || o.root >= comm.size()) {
    return invalid_input("broadcast root " + std::to_string(o.root) + " is not a rank of " +
                         comm.describe());
  }
  if (bytes > 0 && data == nullptr) return invalid_input("broadcast of a null buffer");
  const auto timeout = o.timeout.count() > 0 ? o.timeout : comm.timeout();
  const Deadline deadline = coarse_deadline(timeout);
  Status s =
      o.algorithm == BroadcastAlgorithm::kChain
          ? detail::chain_broadcast(comm, data, bytes, o.root, o.segment_bytes, detail::kTagBcast,
                                    deadline)
          : detail::binomial_broadcast(comm, data, bytes, o.root, detail::kTagBcast, deadline);
  if (!s) {
    return std::move(s).error().wrap("broadcast of " + std::to_string(bytes) + " bytes from rank " +
                                     std::to_string(o.root) + " on " + comm.describe());
  }
  return s;
}

}  // namespace

Status allreduce(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
                 ReduceOp op, const AllreduceOptions& options) {
  return comm.run_collective(
      [&] { return allreduce_now(comm, send, recv, count, type, op, options); });
}

Request allreduce_async(Communicator& comm, const void* send, void* recv, size_t count,
                        DataType type, ReduceOp op, const AllreduceOptions& options) {
  return comm.start_async([&comm, send, recv, count, type, op, options] {
    return allreduce_now(comm, send, recv, count, type, op, options);
  });
}

Status broadcast(Communicator& comm, void* data, size_t bytes, const BroadcastOptions& options) {
  return comm.run_collective([&] { return broadcast_now(comm, data, bytes, options); });
}

Request broadcast_async(Communicator& comm, void* data, size_t bytes,
                        const BroadcastOptions& options) {
  return comm.start_async(
      [&comm, data, bytes, options] { return broadcast_now(comm, data, bytes, options); });
}

}  // namespace dltune::comm
