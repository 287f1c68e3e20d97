// The Communicator interface: ranks, point-to-point on bytes, node-local and cross-node
// sub-communicators, node-shared buffers, scratch memory and a communication thread.
//
// Collective algorithms (comm/allreduce.h, comm/broadcast.h) are free functions over this
// interface. Implementations: ThreadCommunicator (ranks as threads of one process, for tests),
// MpiCommunicator (Open MPI point-to-point; only when built with MPI), NcclCommunicator (GPU
// memory; comm/nccl_communicator.h).
//
// Threading: collectives and blocking calls on a Communicator are made by one thread at a time.
// Non-blocking collectives run on the communicator's own communication thread, one at a time,
// in the order they were started; a blocking collective started while requests are outstanding
// is queued behind them (see run_collective()). Non-blocking point-to-point (isend / irecv with
// user tags) may be used from one other thread while collectives run on the communication
// thread: user tags and the collectives' reserved tags never match each other (on MPI they
// travel on separate MPI communicators).
//
// Groups: split() makes sub-communicators with MPI_Comm_split's semantics. A sub-communicator
// is a full Communicator (every algorithm, local() / leaders(), node-shared buffers, its own
// communication thread) and shares no mutable state with its parent: either may be destroyed
// first (on MPI, both before mpi_finalize()).
//
// Failures: every blocking operation takes a deadline, every non-blocking one carries one; a
// peer that never answers, or answers with a different message size (ranks passing different
// counts), ends in an Error (kTimeout / kInvalidInput / kPeerFailed), never a hang. After such
// an error the communicator's state is undefined: the job is expected to stop. Destroying a
// communicator cancels its pending non-blocking operations (their requests finish with an
// error), so a receive that will never be matched does not hold up exit.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/request.h"
#include "comm/types.h"
#include "common/result.h"

namespace dltune::comm {

// Now plus `timeout`, read from the coarse monotonic clock: Clock's timeline (CLOCK_MONOTONIC)
// behind by at most one kernel tick (a few ms), in 4 ns where Clock::now() takes 16 ns on the
// machines we measured. For the deadlines of collectives, whose timeouts are seconds: a
// deadline a tick early does not matter; 12 ns of a 0.19 us small allreduce does. Timeouts
// under a second read Clock::now().
Deadline coarse_deadline(std::chrono::milliseconds timeout);

class CommThread;
class SharedSegment;
struct CmaPeers;
class Registration;
struct RegistrationState;

// Tags at or above kReservedTagBase are used by the collectives; user point-to-point traffic
// must use tags in [0, kReservedTagBase).
inline constexpr int kReservedTagBase = 1 << 20;

// The colour with which a rank joins no group in Communicator::split() (as MPI_UNDEFINED; any
// negative colour means the same).
inline constexpr int kUndefined = -1;

// One operation of Communicator::start_batch(): a send of `bytes` bytes at `data` to `peer`, or
// a receive of exactly `bytes` bytes into `data` from `peer`, with a user tag.
struct P2pOp {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  int peer = 0;
  int tag = 0;
  void* data = nullptr;
  size_t bytes = 0;

  static P2pOp send(int peer, int tag, const void* data, size_t bytes) {
    return {Kind::kSend, peer, tag, const_cast<void*>(data), bytes};
  }
  static P2pOp recv(int peer, int tag, void* data, size_t bytes) {
    return {Kind::kRecv, peer, tag, data, bytes};
  }
};

// Memory every rank of the node-local group can read and write: one mmap'd POSIX shared
// memory segment holding one region of the same size per local rank. data() is this rank's
// region; peer(r) is local rank r's region as mapped here. The shared-memory allreduce works
// in place on such memory. Move-only; the mapping lives until every handle to it is gone.
class SharedBuffer {
 public:
  SharedBuffer() = default;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // Local rank r's region. Precondition: 0 <= r < local size.
  void* peer(int local_rank) const;
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

  SharedBuffer(std::shared_ptr<SharedSegment> segment, void* data, size_t bytes)
      : segment_(std::move(segment)), data_(data), bytes_(bytes) {}
  const std::shared_ptr<SharedSegment>& segment() const { return segment_; }

 private:
  std::shared_ptr<SharedSegment> segment_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // A short description for messages: "thread communicator rank 2 of 4", "MPI rank 0 of 2".
  virtual std::string describe() const = 0;

  // Point-to-point on bytes. send() may return before the receiver posted its receive (it is
  // buffered or rendezvous, implementation-defined): use sendrecv() for exchanges.
  // recv() requires a message of exactly `bytes` bytes from `src` with `tag`; a message of
  // another size is an invalid-input error ("rank 1 sent 8 bytes with tag t, rank 0 expected
  // 4: do all ranks pass the same count?"). Every call fails with kTimeout at `deadline`.
  virtual Status send(int dst, int tag, const void* data, size_t bytes, Deadline deadline) = 0;
  virtual Status recv(int src, int tag, void* data, size_t bytes, Deadline deadline) = 0;
  // Sends to `dst` and receives from `src` concurrently (no deadlock when both sides call it).
  virtual Status sendrecv(int dst, int send_tag, const void* send_data, size_t send_bytes, int src,
                          int recv_tag, void* recv_data, size_t recv_bytes, Deadline deadline) = 0;

  // Non-blocking point-to-point with a user tag in [0, kReservedTagBase). Each returns at once
  // with a request; any number may be in flight on one communicator, in both directions.
  // Messages from one rank with one tag are received in the order they were sent (the first
  // posted receive gets the first message); different tags never match each other, so
  // receives of different tags complete in whatever order their messages arrive. Blocking
  // send() / recv() with user tags match isend() / irecv() and keep that order.
  // isend(): the request finishes when `data` may be reused (the message was delivered or
  //   buffered); `data` must stay valid and unmodified until then.
  // irecv(): the request finishes when a message of exactly `bytes` bytes from `src` with `tag`
  //   is in `data`, which must stay valid and unread until then.
  // The request's errors: invalid input for a tag outside [0, kReservedTagBase), a peer outside
  // [0, size()), or (irecv) a message of another size ("rank 1 sent 8 bytes with tag 3, rank 0
  // expected 4"); kTimeout at `deadline` (default: deadline_from_now()), when the operation is
  // cancelled; an error naming this communicator when it is destroyed first; transport errors
  // as kPeerFailed / kInternal. Transport notes: ThreadCommunicator copies (isend finishes at
  // once); MPI uses MPI_Isend / MPI_Irecv on a communicator reserved for point-to-point;
  // NcclCommunicator takes DEVICE pointers, ignores tags (messages match in posting order per
  // pair of ranks) and cannot detect size mismatches, see comm/nccl_communicator.h.
  Request isend(int dst, int tag, const void* data, size_t bytes);
  Request isend(int dst, int tag, const void* data, size_t bytes, Deadline deadline);
  Request irecv(int src, int tag, void* data, size_t bytes);
  Request irecv(int src, int tag, void* data, size_t bytes, Deadline deadline);
  // Starts every operation of `ops` and returns one request per operation, in order, with the
  // semantics and errors of isend() / irecv(). The operations progress concurrently, as if
  // started one by one; on NCCL they are one group (ncclGroupStart/End), which is what lets a
  // send to a rank and a receive from it proceed together there. Use it where a schedule sends
  // and receives at the same step (1F1B's steady state).
  std::vector<Request> start_batch(std::span<const P2pOp> ops);
  std::vector<Request> start_batch(std::span<const P2pOp> ops, Deadline deadline);

  // Collective over this communicator (queued behind outstanding collectives, like
  // run_collective()): ranks passing the same `colour` form one group, ranked by `key`, ties
  // broken by rank in this communicator. Returns this rank's group, or nullptr when `colour`
  // is negative (kUndefined). The group inherits timeout(); it owns its own transport
  // resources and communication thread (see "Groups" above).
  // Errors: kTimeout when a rank does not take part in time (threads, NCCL; MPI_Comm_split has
  // no deadline: there a missing rank stalls the others until the launcher stops the job);
  // transport errors (kPeerFailed, kInternal) from the transport's split; each names this
  // communicator.
  Result<std::unique_ptr<Communicator>> split(int colour, int key);

  // The ranks of this communicator on this node (possibly this communicator itself), and the
  // node leaders (local rank 0 of each node; nullptr on non-leaders). Created once, on first
  // use; collective over this communicator on first call.
  virtual Communicator& local() = 0;
  virtual Communicator* leaders() = 0;
  // The rail: the ranks with this rank's local index on every node (local rank k of each node),
  // nodes in the leaders' order, when this communicator spans several nodes that each hold the
  // same number (> 1) of its ranks; else nullptr, as on transports without rails. Hierarchical
  // allreduce runs its cross-node phase on every rail at once, each on its slice of the vector.
  // Created with local() and leaders().
  virtual Communicator* rail() { return nullptr; }
  // Number of nodes this communicator spans (1 when local() is the whole communicator).
  virtual int node_count() = 0;

  // The transport's own allreduce (MPI_Allreduce). Default: an unsupported error.
  virtual Status native_allreduce(const void* send, void* recv, size_t count, DataType type,
                                  ReduceOp op);

  // Collective over local(): every local rank calls it with the same `bytes`. On success
  // returns this rank's region of a fresh node-shared segment, zero-filled and pre-faulted.
  // Errors: io_error when shared memory cannot be created or mapped (e.g. /dev/shm full),
  // timeout / peer errors from the exchange of the segment's name.
  Result<SharedBuffer> alloc_shared(size_t bytes);
  // If [p, p + bytes) lies inside a SharedBuffer allocated by this communicator's local()
  // group and still alive, returns that segment and the byte offset of p in this rank's region.
  struct SharedSpan {
    std::shared_ptr<SharedSegment> segment;
    size_t offset = 0;
  };
  std::optional<SharedSpan> find_shared(const void* p, size_t bytes);
  // Collective over local() (every local rank calls it, each with its own buffer, which may
  // differ in address and size): registers [p, p + bytes) of this rank's own memory so that
  // the 'cma' allreduce reads and writes it directly (comm/registration.h: what it does to the
  // buffer's pages, and for how long). Where the kernel refuses cross-memory attach, succeeds
  // with an inactive Registration saying why. Errors (on every local rank, naming the rank that
  // failed): io_error when a memfd cannot be created, sized or mapped, or a peer's opened;
  // invalid input for a null p with bytes > 0; timeouts of the exchange.
  Result<Registration> register_memory(void* p, size_t bytes);
  // This rank's live registration (of local()) whose registered range holds [p, p + bytes),
  // or nullptr; and the one with the group's `id` (RegistrationState::id), or nullptr.
  std::shared_ptr<const RegistrationState> find_registration(const void* p, size_t bytes);
  std::shared_ptr<const RegistrationState> registration(uint64_t id);
  // Collective over local(): a persistent node-shared segment of at least bytes_per_rank per
  // local rank, reused across calls and grown (re-created) only when a call needs more. Used to
  // stage buffers that are not in shared memory. The segment stays valid until a later call
  // grows it (a raw pointer, so that a small allreduce copies no shared_ptr). Errors as
  // alloc_shared().
  Result<SharedSegment*> staging_segment(size_t bytes_per_rank);

  // Collective over local() on its first call: whether the node-local ranks may copy between
  // each other's memory with cross-memory attach, and their process ids (comm/cma.h), probed
  // once (by `deadline`) and kept for local()'s lifetime. Errors as cma::probe() (a refusal is
  // no error).
  Result<const CmaPeers*> cma_peers(Deadline deadline);

  // Persistent scratch memory: the returned block (64-byte aligned, pre-faulted) stays valid
  // until the next scratch() call with the same slot and a larger size; it only grows, so a
  // steady state of collectives allocates nothing. Slots 0..kScratchSlots-1; kScratchSmallShm
  // belongs to the small-message shared-memory allreduce (which runs inside hierarchical, whose
  // other phases use slots 0 and 1); kScratchCma to the cma allreduce (which also runs inside
  // hierarchical, and on the communicator whose slot 2 holds the allreduce sweep's buffers).
  static constexpr int kScratchSlots = 5;
  static constexpr int kScratchSmallShm = 3;
  static constexpr int kScratchCma = 4;
  void* scratch(int slot, size_t bytes);

  // The default deadline for an operation started now (timeout from set_timeout(), default
  // DLTUNE_COMM_TIMEOUT_MS), from coarse_deadline().
  Deadline deadline_from_now() const { return coarse_deadline(timeout_); }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

  // Runs `op` (a callable returning Status) as a collective: inline when no request is
  // outstanding, otherwise queued behind them on the communication thread and waited for.
  // Returns op's status. The inline path wraps nothing in a std::function (no allocation:
  // 10 ns of a 0.19 us small allreduce).
  template <typename F>
  Status run_collective(F&& op) {
    if (!begin_inline()) return run_queued(std::function<Status()>(std::forward<F>(op)));
    Status s = op();
    end_inline();
    return s;
  }
  // Queues `op` on the communication thread (started on first use) and returns its request.
  // Operations run one at a time, in the order they were started.
  Request start_async(std::function<Status()> op);

 protected:
  Communicator();
  // The transports' halves of isend / irecv / start_batch / split, called with validated
  // arguments (peers in range, user tags; start_batch_now: a non-empty batch).
  virtual Request start_send(int dst, int tag, const void* data, size_t bytes,
                             Deadline deadline) = 0;
  virtual Request start_recv(int src, int tag, void* data, size_t bytes, Deadline deadline) = 0;
  // Default: start_send / start_recv for each operation.
  virtual std::vector<Request> start_batch_now(std::span<const P2pOp> ops, Deadline deadline);
  virtual Result<std::unique_ptr<Communicator>> split_now(int colour, int key) = 0;
  // invalid input when `peer` or `tag` cannot be used by isend / irecv on this communicator.
  Status check_p2p(int peer, int tag, const char* role) const;
  // Stops the communication thread. Implementations call it first in their destructor, so that
  // no queued operation runs on a half-destroyed object.
  void stop_comm_thread();

 private:
  // run_collective(): true when op may run inline now (no communication thread, or it is idle
  // and held off until end_inline()); run_queued() queues op and waits for it.
  bool begin_inline();
  void end_inline();
  Status run_queued(std::function<Status()> op);
  // register_memory()'s work, run as a collective.
  Result<Registration> register_now(void* p, size_t bytes);

  struct Scratch;
  std::unique_ptr<CommThread> thread_;
  std::unique_ptr<Scratch> scratch_;
  std::vector<std::weak_ptr<SharedSegment>> segments_;
  std::shared_ptr<SharedSegment> staging_;
  std::shared_ptr<const CmaPeers> cma_;
  std::vector<std::weak_ptr<RegistrationState>> registrations_;
  uint64_t registrations_made_ = 0;
  std::chrono::milliseconds timeout_;
};

}  // namespace dltune::comm
