// The NCCL communicator: collectives on GPU memory through NCCL, bootstrapped over PMIx.
//
//   auto boot = comm::Bootstrap::init();                     // rank, size, local rank
//   comm::NcclOptions opts;                                  // NCCL decides algo/proto
//   auto nccl = comm::NcclCommunicator::create(*boot, /*device=*/0, opts);
//   DLTUNE_TRY((*nccl)->allreduce_device(d_grads, d_grads, n, DataType::kF32,
//                                        ReduceOp::kSum, stream));   // enqueued on stream
//   DLTUNE_TRY((*nccl)->synchronize(stream));
//
// Rank 0 creates the NCCL unique id and publishes it through the Bootstrap (put / commit /
// fence / get), every rank then calls ncclCommInitRank on its device: one rank per GPU, the
// device being the one the launcher's placement made visible (CUDA_VISIBLE_DEVICES), so
// usually device 0.
//
// As a Communicator it is a GPU transport: native_allreduce() is ncclAllReduce on DEVICE
// pointers (synchronous), send/recv/sendrecv are ncclSend/ncclRecv on device pointers (these
// synchronous calls first wait for the legacy default stream, so buffers filled with cudaMemcpy
// are complete), and
// isend / irecv / start_batch are non-blocking ncclSend/ncclRecv on an internal stream (or on a
// caller's stream: start_batch_on()). The host-memory algorithms of comm/allreduce.h (ring,
// recursive doubling, shm, ...) do not apply to it; comm::allreduce with kNative works (device
// pointers). split() is ncclCommSplit; the group learns its ranks' nodes with an allgather.
//
// Threads: NCCL allows no concurrent calls on one communicator, nor on communicators of one
// device, so every NCCL call here is issued under one process-wide lock (held while enqueuing,
// never while waiting for the GPU): point-to-point from the caller's thread and a collective
// on the communication thread of this or a split communicator may be started at the same time.
// NCCL does not promise that operations on different communicators of one device progress
// concurrently, though: every rank must start them in an order that completes even if they
// run one after the other (as pipeline-parallel frameworks do over NCCL).
//
// Everything here builds without NCCL (DLTUNE_HAVE_NCCL == 0): then nccl_available() is false
// and create() returns an unsupported error naming the build option.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/types.h"
#include "common/result.h"

namespace dltune::comm {

class Bootstrap;

// True when this build has NCCL (and CUDA).
bool nccl_available();
// The NCCL library version as "2.28.3", or "" without NCCL.
std::string nccl_version_string();
// Number of CUDA devices this process can use; an error (kUnsupported) with the reason when
// none: a build without CUDA, no driver, or no device ("no CUDA device: cudaGetDeviceCount
// said ..."). GPU tests skip with this reason.
Result<int> cuda_device_count();

// How NCCL runs its collectives on this communicator. Empty fields let NCCL (or an NCCL tuner
// plugin) decide. Values are NCCL's names: algo "ring", "tree", "collnet_direct",
// "collnet_chain", "nvls", "nvls_tree", "pat"; proto "ll", "ll128", "simple".
struct NcclOptions {
  std::string algo;
  std::string proto;
};

// Parses "nccl", "nccl:ring", "nccl:ring/ll", "nccl:/simple" into options; invalid_input
// naming the accepted values otherwise ("nccl:" and "nccl:/" too: they name nothing).
Result<NcclOptions> parse_nccl_choice(const std::string& text);
// The inverse: "nccl" when both empty, else "nccl:ALGO/PROTO" (an empty part stays empty:
// "nccl:ring/", "nccl:/simple"). parse_nccl_choice(nccl_choice_name(o)) gives o back.
std::string nccl_choice_name(const NcclOptions& opts);
// The accepted names, in NCCL's order: algorithms ring, tree, collnet_direct, collnet_chain,
// nvls, nvls_tree, pat; protocols ll, ll128, simple.
const std::vector<std::string>& nccl_algo_names();
const std::vector<std::string>& nccl_proto_names();
// The choices `dltune bench --backend nccl` and `dltune tune --collectives --backend nccl`
// measure by default: "nccl" (NCCL decides) and ring and tree with each protocol, the ones
// NCCL offers on every topology (collnet and nvls need special hardware, pat is not an
// allreduce algorithm).
const std::vector<NcclOptions>& default_nccl_choices();

class NcclCommunicator final : public Communicator {
 public:
  // Collective over every rank of `boot`'s job: exchanges the unique id through the
  // Bootstrap (key "dltune.nccl.id.<n>", n counting this process's creates, so every rank must
  // create its communicators in the same order) and initialises NCCL on `device` (an index
  // among the visible devices), non-blocking, under the DLTUNE_COMM_TIMEOUT_MS deadline.
  // A rank whose local checks fail still joins the exchange, so its peers are not left in the
  // fence; rank 0's failure reaches the others as peer_failed.
  //
  // The options select ALLREDUCE's algorithm and protocol on this communicator (broadcast and
  // the other collectives keep NCCL's choice): NCCL reads NCCL_ALGO / NCCL_PROTO every time it
  // initialises a communicator (its tuning tables are built in init, through getenv; NCCL
  // 2.28 does not cache them per process), so create() sets them to "allreduce:Ring" etc.,
  // appended to any value the user set, for the duration of the init and restores them after.
  // Concurrent create() calls serialise on that. An NCCL tuner plugin (NCCL_TUNER_PLUGIN)
  // still chooses among what the variables leave enabled.
  //
  // Errors: unsupported without NCCL or without a device; invalid_input for a device index out
  // of range or bad options; peer_failed / timeout from the id exchange; timeout when the
  // init does not finish by the deadline (the communicator is aborted); internal with NCCL's
  // error string (ncclGetErrorString / ncclGetLastError) when NCCL fails.
  static Result<std::unique_ptr<NcclCommunicator>> create(Bootstrap& boot, int device,
                                                          const NcclOptions& opts);
  ~NcclCommunicator() override;

  int rank() const override;
  int size() const override;
  std::string describe() const override;  // "NCCL rank 0 of 1 on GPU 0 (NVIDIA H200)"
  int device() const;
  const NcclOptions& options() const;

  // Enqueues ncclAllReduce of `count` elements on `stream` (a cudaStream_t; nullptr = the
  // legacy default stream) and returns without waiting. Device pointers; send == recv is in
  // place. Errors: internal with NCCL's message (including an asynchronous error from an
  // earlier operation, checked with ncclCommGetAsyncError).
  Status allreduce_device(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                          void* stream);
  // Enqueues ncclBroadcast of `bytes` bytes from `root` (in place) on `stream`.
  Status broadcast_device(void* buf, size_t bytes, int root, void* stream);
  // Waits for `stream` while watching NCCL's asynchronous error state, until `deadline`:
  // kTimeout (after ncclCommAbort, so no rank hangs) or internal when NCCL reports an error.
  Status synchronize(void* stream, Deadline deadline);
  Status synchronize(void* stream) { return synchronize(stream, deadline_from_now()); }

  // Non-blocking point-to-point on `stream` (a cudaStream_t; nullptr = the legacy default
  // stream) on DEVICE pointers: enqueues the operations of `ops` as one NCCL group
  // (ncclGroupStart, ncclSend / ncclRecv each, ncclGroupEnd), so that they progress together
  // (NCCL promises nothing for operations in separate groups that must progress at the same
  // time, e.g. a send to a rank and a receive from it), and returns once they are enqueued.
  // Every returned request finishes when the whole group finished on the GPU (a CUDA event
  // recorded on `stream` after it); later work on `stream` is ordered after the group anyway,
  // so waiting is needed only before the host or another stream touches the buffers.
  // NCCL has no tags: tags are checked to be user tags but not compared, and messages between
  // two ranks match in the order they were posted; sizes must agree (NCCL cannot detect a
  // mismatch). Errors (in every request): invalid input for a bad peer or tag; internal with
  // NCCL's message when enqueuing fails or NCCL reports an asynchronous error (the
  // communicator is then aborted); kTimeout at the deadline (default deadline_from_now()),
  // after ncclCommAbort, so no rank hangs on a dead peer.
  std::vector<Request> start_batch_on(std::span<const P2pOp> ops, void* stream);
  std::vector<Request> start_batch_on(std::span<const P2pOp> ops, void* stream, Deadline deadline);
  // One-operation forms of start_batch_on().
  Request isend_on(int dst, int tag, const void* data, size_t bytes, void* stream);
  Request irecv_on(int src, int tag, void* data, size_t bytes, void* stream);

  // Communicator: device pointers, synchronous (on an internal stream). NCCL has no tags: the
  // tag arguments are ignored and messages between two ranks match in order; a size mismatch
  // between sender and receiver is not detected. local() / leaders() are ncclCommSplit
  // children made on first use (collective over this communicator); when the split fails the
  // error is logged, local() is this communicator and leaders() nullptr.
  Status send(int dst, int tag, const void* data, size_t bytes, Deadline deadline) override;
  Status recv(int src, int tag, void* data, size_t bytes, Deadline deadline) override;
  Status sendrecv(int dst, int send_tag, const void* send_data, size_t send_bytes, int src,
                  int recv_tag, void* recv_data, size_t recv_bytes, Deadline deadline) override;
  Communicator& local() override;
  Communicator* leaders() override;
  int node_count() override;
  Status native_allreduce(const void* send, void* recv, size_t count, DataType type,
                          ReduceOp op) override;

  struct Impl;

 protected:
  // isend / irecv / start_batch: start_batch_on() on the internal point-to-point stream.
  Request start_send(int dst, int tag, const void* data, size_t bytes, Deadline deadline) override;
  Request start_recv(int src, int tag, void* data, size_t bytes, Deadline deadline) override;
  std::vector<Request> start_batch_now(std::span<const P2pOp> ops, Deadline deadline) override;
  Result<std::unique_ptr<Communicator>> split_now(int colour, int key) override;

 private:
  explicit NcclCommunicator(std::unique_ptr<Impl> impl);
  // Enqueues `ops` (validated) as one group on `stream`; see start_batch_on().
  std::vector<Request> post(std::span<const P2pOp> ops, void* stream, Deadline deadline);
  // A split group's node layout: every member's node, gathered over the group from each
  // member's `node_index` in its parent; sets node_index, local_rank and num_nodes.
  Status learn_layout(int node_index, Deadline deadline);
  // Creates the node-local and node-leader communicators (ncclCommSplit, collective); on
  // failure logs the error and leaves them absent (local() is then this communicator).
  void make_subs();
  std::unique_ptr<Impl> impl_;
};

}  // namespace dltune::comm
