// Internal to the MPI communicator (mpi_communicator.cc, mpi_p2p.cc; MPI builds only).
//
// Each MpiCommunicator holds two MPI communicators over the same ranks: `comm_` for the
// collectives (tags >= kReservedTagBase, MPI_Allreduce, splits) and `p2p_`, a duplicate, for
// user-tagged point-to-point (blocking send / recv with a user tag, isend / irecv). The
// communication thread runs collectives on comm_ while another thread posts point-to-point on
// p2p_: MPI matches messages per communicator, so neither can take the other's message, and
// the two threads never share a matching queue. This needs MPI_THREAD_MULTIPLE, which
// create_mpi_world() requires.
#pragma once

// The C API only: Open MPI's C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <mpi.h>

#include "comm/communicator.h"
#include "common/result.h"

namespace dltune::comm {

std::string mpi_error_string(int code);

struct MpiRequestState;

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (freed also on failure), sets MPI_ERRORS_RETURN on it and
  // duplicates it for point-to-point (collective over `comm`). Does not make the node-local
  // groups: call make_subs(). Errors: internal when MPI_Comm_dup fails.
  static Result<std::unique_ptr<MpiCommunicator>> create(MPI_Comm comm);
  ~MpiCommunicator() override;

  // Splits off the node-local and node-leader communicators, and with `top` the rails
  // (collective).
  Status make_subs(bool top);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return "MPI rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  }
  Status send(int dst, int tag, const void* data, size_t bytes, Deadline deadline) override;
  Status recv(int src, int tag, void* data, size_t bytes, Deadline deadline) override;
  Status sendrecv(int dst, int send_tag, const void* send_data, size_t send_bytes, int src,
                  int recv_tag, void* recv_data, size_t recv_bytes, Deadline deadline) override;
  Communicator& local() override { return local_ ? *local_ : *this; }
  Communicator* leaders() override { return size_ == 1 ? this : leaders_.get(); }
  Communicator* rail() override { return rail_.get(); }
  int node_count() override { return size_ == 1 ? 1 : nodes_; }
  Status native_allreduce(const void* send, void* recv, size_t count, DataType type,
                          ReduceOp op) override;

 protected:
  Request start_send(int dst, int tag, const void* data, size_t bytes, Deadline deadline) override;
  Request start_recv(int src, int tag, void* data, size_t bytes, Deadline deadline) override;
  Result<std::unique_ptr<Communicator>> split_now(int colour, int key) override;

 private:
  MpiCommunicator(MPI_Comm comm, MPI_Comm p2p);
  // The MPI communicator a message with `tag` travels on.
  MPI_Comm comm_for(int tag) const { return tag >= kReservedTagBase ? comm_ : p2p_; }
  static Status check_bytes(size_t bytes);
  Status wait_all(MPI_Request* reqs, int n, int peer, size_t bytes, int recv_index,
                  Deadline deadline);
  // Remembers a pending request, so that the destructor can cancel it.
  void track(const std::shared_ptr<MpiRequestState>& state);
  // Cancels every pending request (their waiters get an error naming this communicator).
  void cancel_outstanding();

  MPI_Comm comm_;
  MPI_Comm p2p_;
  int rank_ = 0;
  int size_ = 1;
  int nodes_ = 1;
  uint64_t spin_polls_;  // polls of a blocking wait before it starts yielding
  std::unique_ptr<MpiCommunicator> local_;
  std::unique_ptr<MpiCommunicator> leaders_;
  std::unique_ptr<MpiCommunicator> rail_;
  std::mutex outstanding_mu_;
  std::vector<std::weak_ptr<MpiRequestState>> outstanding_;
  size_t prune_at_ = 64;
};

}  // namespace dltune::comm
