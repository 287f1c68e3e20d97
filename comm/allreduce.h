// Allreduce and broadcast: free functions over a Communicator, each configured by an options
// object carrying its algorithm, tuning parameters and timeout (gloo's shape).
//
//   comm::AllreduceOptions opts;
//   opts.algorithm = comm::Algorithm::kRing;
//   DLTUNE_TRY(comm::allreduce(comm, grads, grads, n, comm::DataType::kF32,
//                              comm::ReduceOp::kSum, opts));     // in place
//
//   comm::Request r = comm::allreduce_async(comm, bucket, bucket, n, ...);  // overlapped
//   ... compute ...
//   DLTUNE_TRY(r.wait());
//
// Every rank must call the same collectives in the same order with the same count, type, op
// and options (algorithm included). Results are identical on every rank for every algorithm
// (each element is reduced in one place and then copied), so floating-point sums agree
// bitwise across ranks, though not necessarily with a serial left-to-right sum.
#pragma once

#include <chrono>
#include <cstddef>

#include "comm/communicator.h"
#include "comm/types.h"
#include "common/result.h"

namespace dltune::comm {

struct AllreduceOptions {
  Algorithm algorithm = Algorithm::kRing;
  // Ring: pipelining segment in bytes; each ring step's chunk is sent in segments of at most
  // this size so that reduction of one segment overlaps the transfer of the next. 0 = whole
  // chunks (plain ring). Hierarchical passes it to its ring among nodes.
  size_t segment_bytes = size_t{1} << 20;
  // Hierarchical: the node-local algorithm (kShm, kCma, kTree, kRing, kRecursiveDoubling or
  // kRabenseifner) and the flat algorithm among node leaders (any but kHierarchical, kShm and
  // kCma).
  Algorithm inner = Algorithm::kShm;
  Algorithm outer = Algorithm::kRing;
  // Whole-operation timeout; 0 = the communicator's timeout().
  std::chrono::milliseconds timeout{0};
};

// Reduces `count` elements of `type` from every rank with `op` and leaves the result in `recv`
// on every rank. send == recv means in place; otherwise the buffers must not overlap and
// `send` is not modified. Buffers need no particular alignment. count == 0 is a no-op that
// still validates options. For kShm, buffers inside a SharedBuffer of comm.local() are reduced
// in place in shared memory (the fast path); registered ones (comm/registration.h) from
// kCmaMinBytes as kCma reduces them, in place; other buffers are staged through a persistent
// shared segment. kCma copies between the local ranks' own buffers with cross-memory attach
// (comm/cma.h), on any buffer, and runs kShm instead where the kernel refuses that (probed once
// per node-local group; logged once).
// Errors: invalid input for an option that does not apply (e.g. kShm or kCma across nodes,
// kNative on a communicator without one, hierarchical with outer == kHierarchical); kTimeout
// when a peer does not answer before the timeout; invalid input when ranks pass different
// counts (detected from message sizes) — or kTimeout when the mismatch cannot be told from
// sizes; for kCma, errors of its cross-memory copies (a buffer outside the peer's mappings, a
// peer gone) on the rank that saw them and kPeerFailed on the others. The message names the
// algorithm and the communicator.
Status allreduce(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
                 ReduceOp op, const AllreduceOptions& options);

// The non-blocking form: queues the allreduce on comm's communication thread and returns at
// once. The buffers must stay valid and untouched (send unread-only, recv unread) until the
// request completes. Requests complete in the order they were started.
Request allreduce_async(Communicator& comm, const void* send, void* recv, size_t count,
                        DataType type, ReduceOp op, const AllreduceOptions& options);

enum class BroadcastAlgorithm { kBinomial, kChain };

struct BroadcastOptions {
  BroadcastAlgorithm algorithm = BroadcastAlgorithm::kBinomial;
  int root = 0;
  // Chain: pipelining segment in bytes (0 = whole message).
  size_t segment_bytes = size_t{256} << 10;
  std::chrono::milliseconds timeout{0};
};

// Copies `bytes` bytes from `data` on options.root into `data` on every other rank.
// Errors: invalid input for a root outside [0, size); timeouts and size mismatches as above.
Status broadcast(Communicator& comm, void* data, size_t bytes, const BroadcastOptions& options);
// The non-blocking form (same rules as allreduce_async).
Request broadcast_async(Communicator& comm, void* data, size_t bytes,
                        const BroadcastOptions& options);

}  // namespace dltune::comm
