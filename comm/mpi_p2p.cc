// Non-blocking point-to-point on the MPI communicator (MPI builds only): MPI_Isend / MPI_Irecv
// on the point-to-point duplicate, one polled request each. A waiter drives the request with
// MPI_Test (which runs Open MPI's progress engine); a request past its deadline is cancelled.
// The communicator remembers its pending requests and cancels them when it is destroyed, so
// that a receive that will never be matched holds up neither MPI_Comm_free nor MPI_Finalize.
//
// Progress: Open MPI moves a message while some thread of the process is inside MPI (a wait or
// test on a request, a collective on the communication thread). A large message (rendezvous,
// over the eager limit) whose receiver computes for a long time without either starts to move
// when the receiver next waits or tests.
#include <climits>
#include <string>

#include "comm/mpi_impl.h"
#include "comm/request_state.h"

namespace dltune::comm {

struct MpiRequestState final : Request::State {
  void poll_locked() override {
    int flag = 0;
    MPI_Status st;
    const int rc = MPI_Test(&req, &flag, &st);
    if (rc != MPI_SUCCESS) {
      release();
      finish_locked(error_for(rc));
      return;
    }
    if (!flag) return;
    if (is_recv) {
      int got = 0;
      MPI_Get_count(&st, MPI_BYTE, &got);
      if (static_cast<size_t>(got) != bytes) {
        finish_locked(size_error(std::to_string(got)));
        return;
      }
    }
    finish_locked(ok_status());
  }

  void expire_locked() override {
    release();
    finish_locked(timeout_error(
        is_recv ? "rank " + std::to_string(peer) + " sent nothing with tag " + std::to_string(tag) +
                      " in time (dead peer or mismatched calls?)"
                : "the send to rank " + std::to_string(peer) + " with tag " + std::to_string(tag) +
                      " did not finish in time (is it receiving?)"));
  }

  // Cancels and frees the MPI request if it is still active (MPI_Cancel succeeds for an
  // unmatched receive; Open MPI cannot cancel a send, which then finishes in the background).
  void release() {
    if (req != MPI_REQUEST_NULL) {
      MPI_Cancel(&req);
      MPI_Request_free(&req);
    }
  }

  Error size_error(const std::string& got) const {
    return invalid_input("rank " + std::to_string(peer) + " sent " + got + " bytes with tag " +
                         std::to_string(tag) + ", rank " + std::to_string(me) + " expected " +
                         std::to_string(bytes) + ": do all ranks pass the same count?");
  }

  Error error_for(int code) const {
    int cls = 0;
    MPI_Error_class(code, &cls);
    if (is_recv && cls == MPI_ERR_TRUNCATE) return size_error("more than " + std::to_string(bytes));
    return peer_failed(std::string(is_recv ? "receiving from" : "sending to") + " rank " +
                       std::to_string(peer) + " failed: " + mpi_error_string(code));
  }

  MPI_Request req = MPI_REQUEST_NULL;
  bool is_recv = false;
  size_t bytes = 0;
  int peer = 0, tag = 0, me = 0;
};

namespace {

std::shared_ptr<MpiRequestState> make_state(bool is_recv, int peer, int tag, int me, size_t bytes,
                                            uint64_t spin_polls, Deadline deadline) {
  auto s = std::make_shared<MpiRequestState>();
  s->is_recv = is_recv, s->peer = peer, s->tag = tag, s->me = me, s->bytes = bytes;
  s->polled = true;
  s->spin_polls = spin_polls;
  s->deadline = deadline;
  return s;
}

}  // namespace

Request MpiCommunicator::start_send(int dst, int tag, const void* data, size_t bytes,
                                    Deadline deadline) {
  if (Status s = check_bytes(bytes); !s) return Request::finished(std::move(s));
  auto state = make_state(false, dst, tag, rank_, bytes, spin_polls_, deadline);
  int rc = MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, dst, tag, p2p_, &state->req);
  if (rc != MPI_SUCCESS)
    return Request::finished(internal_error("MPI_Isend: " + mpi_error_string(rc)));
  track(state);
  return Request(state);
}

Request MpiCommunicator::start_recv(int src, int tag, void* data, size_t bytes, Deadline deadline) {
  if (Status s = check_bytes(bytes); !s) return Request::finished(std::move(s));
  auto state = make_state(true, src, tag, rank_, bytes, spin_polls_, deadline);
  int rc = MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, src, tag, p2p_, &state->req);
  if (rc != MPI_SUCCESS)
    return Request::finished(internal_error("MPI_Irecv: " + mpi_error_string(rc)));
  track(state);
  return Request(state);
}

void MpiCommunicator::track(const std::shared_ptr<MpiRequestState>& state) {
  std::lock_guard lock(outstanding_mu_);
  if (outstanding_.size() >= prune_at_) {
    std::erase_if(outstanding_, [](const std::weak_ptr<MpiRequestState>& w) {
      auto s = w.lock();
      if (!s) return true;
      std::lock_guard slock(s->mu);
      return s->done;
    });
    prune_at_ = std::max<size_t>(64, 2 * outstanding_.size());
  }
  outstanding_.push_back(state);
}

void MpiCommunicator::cancel_outstanding() {
  std::lock_guard lock(outstanding_mu_);
  for (const auto& w : outstanding_) {
    auto s = w.lock();
    if (!s) continue;
    std::lock_guard slock(s->mu);
    if (s->done) continue;
    s->release();
    s->finish_locked(internal_error("cancelled: " + describe() + " was destroyed while " +
                                    (s->is_recv ? "receiving from" : "sending to") + " rank " +
                                    std::to_string(s->peer) + " with tag " +
                                    std::to_string(s->tag)));
  }
  outstanding_.clear();
}

}  // namespace dltune::comm
