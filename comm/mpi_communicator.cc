// The MPI communicator. The only file that looks at DLTUNE_HAVE_MPI.
#include "comm/mpi_communicator.h"

#include <cstdlib>

#include "dltune/config.h"

#if DLTUNE_HAVE_MPI
// The C API only: Open MPI's C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <climits>
#include <string>

#include <mpi.h>
#include <sched.h>

#include "comm/spin_wait.h"
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

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<size_t>(len));
}

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

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (freed in the destructor).
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    stop_comm_thread();
    local_.reset();
    leaders_.reset();
    MPI_Comm_free(&comm_);
  }

  // Splits off the node-local and node-leader communicators (collective).
  Status make_subs(bool top) {
    subs_ = true;
    if (size_ == 1) return ok_status();
    MPI_Comm loc = MPI_COMM_NULL;
    int rc = MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &loc);
    if (rc != MPI_SUCCESS) return internal_error("MPI_Comm_split_type: " + mpi_error_string(rc));
    int local_size = 0, local_rank = 0;
    MPI_Comm_size(loc, &local_size);
    MPI_Comm_rank(loc, &local_rank);
    // More ranks on this node than CPUs: a waiting rank may hold the core its peer needs, so
    // wait_all() yields after a few polls instead of after ~100 us of spinning.
    if (local_size > SpinWait::online_cpus()) spin_polls_ = kOversubscribedSpinPolls;
    if (local_size == size_) {
      MPI_Comm_free(&loc);
    } else {
      local_ = std::make_unique<MpiCommunicator>(loc);
      local_->spin_polls_ = spin_polls_;
      if (top) DLTUNE_TRY(local_->make_subs(false));
    }
    MPI_Comm lead = MPI_COMM_NULL;
    rc = MPI_Comm_split(comm_, local_rank == 0 ? 0 : MPI_UNDEFINED, rank_, &lead);
    if (rc != MPI_SUCCESS) return internal_error("MPI_Comm_split: " + mpi_error_string(rc));
    int leader = local_rank == 0 ? 1 : 0;
    MPI_Allreduce(&leader, &nodes_, 1, MPI_INT, MPI_SUM, comm_);
    if (lead != MPI_COMM_NULL) {
      leaders_ = std::make_unique<MpiCommunicator>(lead);
      leaders_->spin_polls_ = spin_polls_;
    }
    return ok_status();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return "MPI rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  }

  Status send(int dst, int tag, const void* data, size_t bytes, Deadline deadline) override {
    DLTUNE_TRY(check_bytes(bytes));
    MPI_Request req;
    int rc = MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, dst, tag, comm_, &req);
    if (rc != MPI_SUCCESS) return internal_error("MPI_Isend: " + mpi_error_string(rc));
    return wait_all(&req, 1, dst, bytes, -1, deadline);
  }
  Status recv(int src, int tag, void* data, size_t bytes, Deadline deadline) override {
    DLTUNE_TRY(check_bytes(bytes));
    MPI_Request req;
    int rc = MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, src, tag, comm_, &req);
    if (rc != MPI_SUCCESS) return internal_error("MPI_Irecv: " + mpi_error_string(rc));
    return wait_all(&req, 1, src, bytes, 0, deadline);
  }
  Status sendrecv(int dst, int send_tag, const void* send_data, size_t send_bytes, int src,
                  int recv_tag, void* recv_data, size_t recv_bytes, Deadline deadline) override {
    DLTUNE_TRY(check_bytes(send_bytes));
    DLTUNE_TRY(check_bytes(recv_bytes));
    MPI_Request reqs[2];
    int rc = MPI_Irecv(recv_data, static_cast<int>(recv_bytes), MPI_BYTE, src, recv_tag, comm_,
                       &reqs[0]);
    if (rc != MPI_SUCCESS) return internal_error("MPI_Irecv: " + mpi_error_string(rc));
    rc = MPI_Isend(send_data, static_cast<int>(send_bytes), MPI_BYTE, dst, send_tag, comm_,
                   &reqs[1]);
    if (rc != MPI_SUCCESS) return internal_error("MPI_Isend: " + mpi_error_string(rc));
    return wait_all(reqs, 2, src, recv_bytes, 0, deadline);
  }

  Communicator& local() override { return local_ ? *local_ : *this; }
  Communicator* leaders() override {
    if (size_ == 1) return this;
    return leaders_.get();
  }
  int node_count() override { return size_ == 1 ? 1 : nodes_; }

  Status native_allreduce(const void* send, void* recv, size_t count, DataType type,
                          ReduceOp op) override {
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

 private:
  static Status check_bytes(size_t bytes) {
    if (bytes > static_cast<size_t>(INT_MAX)) {
      return invalid_input("a single message of " + std::to_string(bytes) +
                           " bytes is over MPI's 2 GiB limit; use a smaller segment size");
    }
    return ok_status();
  }

  // Polls the requests until done or the deadline; req[recv_index] (if >= 0) is a receive of
  // `bytes` bytes from `peer` whose size is checked. Spins first, then yields the core
  // between polls (ranks may outnumber cores).
  Status wait_all(MPI_Request* reqs, int n, int peer, size_t bytes, int recv_index,
                  Deadline deadline) {
    MPI_Status st[2];
    for (uint64_t polls = 0;; ++polls) {
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
      if (polls > spin_polls_) sched_yield();
      if ((polls & 63) == 63 && Clock::now() > deadline) {
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

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  int nodes_ = 1;
  uint64_t spin_polls_ = kSpinPolls;  // wait_all() polls before it starts yielding
  bool subs_ = false;
  std::unique_ptr<MpiCommunicator> local_;
  std::unique_ptr<MpiCommunicator> leaders_;
};

}  // namespace

bool mpi_available() { return true; }

Result<std::unique_ptr<Communicator>> create_mpi_world() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return internal_error("MPI_Init_thread failed: " + mpi_error_string(rc));
    g_we_initialised = true;
    if (provided < MPI_THREAD_MULTIPLE) {
      return internal_error(
          "this MPI library does not provide MPI_THREAD_MULTIPLE, which the communication "
          "thread needs");
    }
  }
  MPI_Comm dup = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Comm_dup: " + mpi_error_string(rc));
  auto comm = std::make_unique<MpiCommunicator>(dup);
  DLTUNE_TRY(comm->make_subs(true));
  return std::unique_ptr<Communicator>(std::move(comm));
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
