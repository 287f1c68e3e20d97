// The MPI communicator: creation, splits, the blocking operations and MPI_Allreduce. The only
// file that looks at DLTUNE_HAVE_MPI (non-blocking point-to-point: mpi_p2p.cc, MPI builds only).
#include "comm/mpi_communicator.h"

#include <cstdlib>

#include "dltune/config.h"

#if DLTUNE_HAVE_MPI
#include <chrono>
#include <climits>
#include <cstring>
#include <string>

#include "comm/bootstrap/bootstrap.h"
#include "comm/mpi_impl.h"
#include "comm/spin_wait.h"
#include "common/log.h"
#endif

namespace dltune::comm {

bool launched_as_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(v) != nullptr) return true;  // the launcher's variables, not DLTUNE_* ones
  }
  return false;
}

#if DLTUNE_HAVE_MPI
namespace {

// wait_all()'s polls of MPI_Testall (which runs Open MPI's progress engine) before it yields
// the core on every poll: ~100 us when every local rank has a CPU, a few when ranks outnumber
// CPUs (4 ranks on 2 cores: rd at 4 B took 47 us with the long spin under `dltune run`).
constexpr uint64_t kSpinPolls = 2000;
constexpr uint64_t kOversubscribedSpinPolls = 8;

bool g_we_initialised = false;

Result<MPI_Datatype> mpi_type(DataType t) {
  switch (t) {
    case DataType::kF32:
      return MPI_FLOAT;
    case DataType::kF64:
      return MPI_DOUBLE;
    case DataType::kI32:
      return MPI_INT32_T;
    case DataType::kI64:
      return MPI_INT64_T;
  }
  return internal_error("unknown data type");
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  return MPI_SUM;
}

}  // namespace

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<size_t>(len));
}

Result<std::unique_ptr<MpiCommunicator>> MpiCommunicator::create(MPI_Comm comm) {
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm p2p = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(comm, &p2p);  // inherits MPI_ERRORS_RETURN
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(&comm);
    return internal_error("MPI_Comm_dup: " + mpi_error_string(rc));
  }
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(comm, p2p));
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, MPI_Comm p2p)
    : comm_(comm), p2p_(p2p), spin_polls_(kSpinPolls) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  stop_comm_thread();
  cancel_outstanding();
  local_.reset();
  leaders_.reset();
  rail_.reset();
  MPI_Comm_free(&p2p_);
  MPI_Comm_free(&comm_);
}

namespace {

bool told_to_yield() {
  const char* v = std::getenv("OMPI_MCA_mpi_yield_when_idle");
  return v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0);
}

}  // namespace

Status MpiCommunicator::make_subs(bool top) {
  if (size_ == 1) return ok_status();
  MPI_Comm loc = MPI_COMM_NULL;
  int rc = MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &loc);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Comm_split_type: " + mpi_error_string(rc));
  int local_size = 0, local_rank = 0;
  MPI_Comm_size(loc, &local_size);
  MPI_Comm_rank(loc, &local_rank);
  // More ranks on this node than CPUs, or Open MPI told to yield while it waits (the launcher
  // sets it past the host's CPUs; simulated nodes sharing one host's cores set it too): a
  // waiting rank may hold the core its peer needs, so wait_all() yields after a few polls
  // instead of after ~100 us of spinning.
  if (local_size > SpinWait::online_cpus() || told_to_yield())
    spin_polls_ = kOversubscribedSpinPolls;
  if (local_size == size_) {
    MPI_Comm_free(&loc);
  } else {
    auto sub = create(loc);
    if (!sub) return std::move(sub).error().wrap("the node-local communicator");
    local_ = std::move(*sub);
    local_->spin_polls_ = spin_polls_;
    if (top) DLTUNE_TRY(local_->make_subs(false));
  }
  MPI_Comm lead = MPI_COMM_NULL;
  rc = MPI_Comm_split(comm_, local_rank == 0 ? 0 : MPI_UNDEFINED, rank_, &lead);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Comm_split: " + mpi_error_string(rc));
  int leader = local_rank == 0 ? 1 : 0;
  MPI_Allreduce(&leader, &nodes_, 1, MPI_INT, MPI_SUM, comm_);
  if (lead != MPI_COMM_NULL) {
    auto sub = create(lead);
    if (!sub) return std::move(sub).error().wrap("the node-leader communicator");
    leaders_ = std::move(*sub);
    leaders_->spin_polls_ = spin_polls_;
  }
  // Rails (Communicator::rail()): local rank k of every node, when all nodes hold as many ranks.
  // Ordered by rank, as the leaders are, so rail and leader orders of the nodes agree. Only the
  // top communicator of several nodes has them (top and nodes_ agree on every rank, so the
  // collective below is entered by all or none).
  if (!top || nodes_ <= 1) return ok_status();
  int sizes[2] = {local_size, -local_size};  // max and -min of the nodes' sizes
  MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, comm_);
  if (local_size > 1 && sizes[0] == -sizes[1]) {
    MPI_Comm rail = MPI_COMM_NULL;
    rc = MPI_Comm_split(comm_, local_rank, rank_, &rail);
    if (rc != MPI_SUCCESS) return internal_error("MPI_Comm_split: " + mpi_error_string(rc));
    auto sub = create(rail);
    if (!sub) return std::move(sub).error().wrap("the rail communicator");
    rail_ = std::move(*sub);
    rail_->spin_polls_ = spin_polls_;
  }
  return ok_status();
}

// MPI_Comm_split on the collectives' communicator orders the group by key, then rank, as
// split() promises; the group gets its own point-to-point duplicate and node-local groups.
Result<std::unique_ptr<Communicator>> MpiCommunicator::split_now(int colour, int key) {
  MPI_Comm group = MPI_COMM_NULL;
  int rc = MPI_Comm_split(comm_, colour < 0 ? MPI_UNDEFINED : colour, key, &group);
  if (rc != MPI_SUCCESS) return peer_failed("MPI_Comm_split: " + mpi_error_string(rc));
  if (group == MPI_COMM_NULL) return std::unique_ptr<Communicator>();
  auto sub = create(group);
  if (!sub) return std::move(sub).error();
  DLTUNE_TRY((*sub)->make_subs(true));
  return std::unique_ptr<Communicator>(std::move(*sub));
}

Status MpiCommunicator::send(int dst, int tag, const void* data, size_t bytes, Deadline deadline) {
  DLTUNE_TRY(check_bytes(bytes));
  MPI_Request req;
  int rc = MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, dst, tag, comm_for(tag), &req);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Isend: " + mpi_error_string(rc));
  return wait_all(&req, 1, dst, bytes, -1, deadline);
}

Status MpiCommunicator::recv(int src, int tag, void* data, size_t bytes, Deadline deadline) {
  DLTUNE_TRY(check_bytes(bytes));
  MPI_Request req;
  int rc = MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, src, tag, comm_for(tag), &req);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Irecv: " + mpi_error_string(rc));
  return wait_all(&req, 1, src, bytes, 0, deadline);
}

Status MpiCommunicator::sendrecv(int dst, int send_tag, const void* send_data, size_t send_bytes,
                                 int src, int recv_tag, void* recv_data, size_t recv_bytes,
                                 Deadline deadline) {
  DLTUNE_TRY(check_bytes(send_bytes));
  DLTUNE_TRY(check_bytes(recv_bytes));
  MPI_Request reqs[2];
  int rc = MPI_Irecv(recv_data, static_cast<int>(recv_bytes), MPI_BYTE, src, recv_tag,
                     comm_for(recv_tag), &reqs[0]);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Irecv: " + mpi_error_string(rc));
  rc = MPI_Isend(send_data, static_cast<int>(send_bytes), MPI_BYTE, dst, send_tag,
                 comm_for(send_tag), &reqs[1]);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Isend: " + mpi_error_string(rc));
  return wait_all(reqs, 2, src, recv_bytes, 0, deadline);
}

Status MpiCommunicator::native_allreduce(const void* send, void* recv, size_t count, DataType type,
                                         ReduceOp op) {
  if (count > static_cast<size_t>(INT_MAX)) {
    return invalid_input("MPI_Allreduce takes at most 2^31-1 elements, got " +
                         std::to_string(count));
  }
  auto t = mpi_type(type);
  if (!t) return t.error();
  int rc = MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(count), *t,
                         mpi_op(op), comm_);
  if (rc != MPI_SUCCESS) return peer_failed("MPI_Allreduce: " + mpi_error_string(rc));
  return ok_status();
}

Status MpiCommunicator::check_bytes(size_t bytes) {
  if (bytes > static_cast<size_t>(INT_MAX)) {
    return invalid_input("a single message of " + std::to_string(bytes) +
                         " bytes is over MPI's 2 GiB limit; use a smaller segment size");
  }
  return ok_status();
}

// Polls the requests until done or the deadline; req[recv_index] (if >= 0) is a receive of
// `bytes` bytes from `peer` whose size is checked. Spins first, then yields the core
// between polls (ranks may outnumber cores).
Status MpiCommunicator::wait_all(MPI_Request* reqs, int n, int peer, size_t bytes, int recv_index,
                                 Deadline deadline) {
  MPI_Status st[2];
  SpinWait spin = SpinWait::with_spins(spin_polls_);
  for (;;) {
    int done = 0;
    int rc = MPI_Testall(n, reqs, &done, st);
    if (rc != MPI_SUCCESS) {
      int code = rc == MPI_ERR_IN_STATUS && recv_index >= 0 ? st[recv_index].MPI_ERROR : rc;
      int cls = 0;
      MPI_Error_class(code, &cls);
      if (cls == MPI_ERR_TRUNCATE) {
        return invalid_input("rank " + std::to_string(peer) + " sent more than the " +
                             std::to_string(bytes) + " bytes rank " + std::to_string(rank_) +
                             " expected: do all ranks pass the same count?");
      }
      return peer_failed("communication with rank " + std::to_string(peer) +
                         " failed: " + mpi_error_string(code));
    }
    if (done) break;
    if (!spin.wait(deadline)) {
      for (int i = 0; i < n; ++i) {
        if (reqs[i] != MPI_REQUEST_NULL) {
          MPI_Cancel(&reqs[i]);
          MPI_Request_free(&reqs[i]);
        }
      }
      return timeout_error("rank " + std::to_string(peer) +
                           " did not answer in time (dead peer or mismatched calls?)");
    }
  }
  if (recv_index >= 0) {
    int got = 0;
    MPI_Get_count(&st[recv_index], MPI_BYTE, &got);
    if (static_cast<size_t>(got) != bytes) {
      return invalid_input("rank " + std::to_string(peer) + " sent " + std::to_string(got) +
                           " bytes, rank " + std::to_string(rank_) + " expected " +
                           std::to_string(bytes) + ": do all ranks pass the same count?");
    }
  }
  return ok_status();
}

bool mpi_available() { return true; }

namespace {

// Open MPI 4.1's TCP transport (btl/tcp, Debian's 4.1.4) can hand a process the first message of
// a peer that already returned from MPI_Init while this process is still in it, before ob1 has
// registered its receive callback for that tag: the empty slot of the callback table is called
// (SIGSEGV at address 0 inside MPI_Init). Seen with one rank per namespace node under Slurm's
// PMIx, about 1 start in 15 (core dumps: mca_btl_tcp -> active-message trigger, tag 0x41, ob1's
// MATCH). A PMIx fence after MPI_Init keeps every rank from sending until all have returned from
// it. Without a PMIx server there is nothing to fence (one process); a fence that fails is
// logged and skipped: MPI works without it, as before.
void fence_after_mpi_init() {
  auto boot = Bootstrap::init();
  if (!boot) {
    DLTUNE_LOG(kDebug, "comm") << "no PMIx fence after MPI_Init: " << boot.error().message();
    return;
  }
  if (boot->is_singleton()) return;
  if (Status s = boot->fence(std::chrono::minutes(5)); !s.ok()) {
    DLTUNE_LOG(kWarn, "comm") << "the PMIx fence after MPI_Init failed: " << s.error().message();
  }
}

}  // namespace

Result<std::unique_ptr<Communicator>> create_mpi_world() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return internal_error("MPI_Init_thread failed: " + mpi_error_string(rc));
    g_we_initialised = true;
    fence_after_mpi_init();
    if (provided < MPI_THREAD_MULTIPLE) {
      return internal_error(
          "this MPI library does not provide MPI_THREAD_MULTIPLE, which the communication "
          "thread needs");
    }
  } else {
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
      return internal_error(
          "MPI was initialised without MPI_THREAD_MULTIPLE, which the communication thread "
          "needs: initialise it with MPI_Init_thread(MPI_THREAD_MULTIPLE) or let dltune do it");
    }
  }
  MPI_Comm dup = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Comm_dup: " + mpi_error_string(rc));
  auto comm = MpiCommunicator::create(dup);
  if (!comm) return std::move(comm).error();
  DLTUNE_TRY((*comm)->make_subs(true));
  return std::unique_ptr<Communicator>(std::move(*comm));
}

void mpi_finalize() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (g_we_initialised && !finalised) MPI_Finalize();
}

#else  // !DLTUNE_HAVE_MPI

bool mpi_available() { return false; }
Result<std::unique_ptr<Communicator>> create_mpi_world() {
  return unsupported("this dltune was built without MPI (DLTUNE_WITH_MPI=OFF or no Open MPI)");
}
void mpi_finalize() {}

#endif

}  // namespace dltune::comm
