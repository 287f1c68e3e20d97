// ThreadCommunicator: ranks as threads of one process (gloo's test fixture shape), for tests
// and for measuring what the algorithms cost without a transport.
//
//   Status s = comm::spawn(4, [&](comm::Communicator& c) -> Status {
//     return comm::allreduce(c, in, out, n, ...);
//   });
//
// Messages are copied through per-rank mailboxes (a mutex and condition variable each): a send
// copies straight into a posted receive's buffer, or else queues a copy for a later receive.
// A group can pretend to span several nodes (ranks_per_node): local() then holds the ranks of
// one simulated node, and alloc_shared() maps one segment per simulated node. Sub-communicators
// (local(), leaders(), split()) share the group's mailboxes under their own context, so their
// messages never match another communicator's.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "common/result.h"

namespace dltune::comm {

namespace detail {
struct ThreadFabric;
}

class ThreadCommunicator final : public Communicator {
 public:
  // One communicator per rank of a new group of `size` ranks, ranks_per_node of them per
  // simulated node (0 = all on one node). Precondition: size >= 1, ranks_per_node >= 0.
  static std::vector<std::unique_ptr<ThreadCommunicator>> create_group(int size,
                                                                       int ranks_per_node = 0);
  ~ThreadCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::string describe() const override;
  Status send(int dst, int tag, const void* data, size_t bytes, Deadline deadline) override;
  Status recv(int src, int tag, void* data, size_t bytes, Deadline deadline) override;
  Status sendrecv(int dst, int send_tag, const void* send_data, size_t send_bytes, int src,
                  int recv_tag, void* recv_data, size_t recv_bytes, Deadline deadline) override;
  Communicator& local() override;
  Communicator* leaders() override;
  Communicator* rail() override;
  int node_count() override;

  // Sub-communicator of the group: `members` are ranks of the world group, this rank is
  // members[rank]. Public for create_group(); not for general use.
  ThreadCommunicator(std::shared_ptr<detail::ThreadFabric> fabric, long long context,
                     std::vector<int> members, int rank, int ranks_per_node);

 protected:
  Request start_send(int dst, int tag, const void* data, size_t bytes, Deadline deadline) override;
  Request start_recv(int src, int tag, void* data, size_t bytes, Deadline deadline) override;
  Result<std::unique_ptr<Communicator>> split_now(int colour, int key) override;

 private:
  int world(int r) const { return members_[static_cast<size_t>(r)]; }
  // The simulated node of world rank w.
  int node_of(int w) const { return ranks_per_node_ == 0 ? 0 : w / ranks_per_node_; }

  std::shared_ptr<detail::ThreadFabric> fabric_;
  long long context_;
  std::vector<int> members_;  // world ranks, indexed by this communicator's ranks
  int rank_;
  int ranks_per_node_;  // of the world group; 0 = all one node
  std::unique_ptr<ThreadCommunicator> local_;
  std::unique_ptr<ThreadCommunicator> leaders_;
  std::unique_ptr<ThreadCommunicator> rail_;
  bool subs_made_ = false;
  long long splits_ = 0;  // split() calls so far (every rank counts the same)
};

// Runs fn on `size` threads, one ThreadCommunicator each (ranks_per_node as in create_group),
// with the given timeout for every operation. Returns OK when every rank returned OK, else the
// error of the lowest failing rank, prefixed with "rank R".
Status spawn(int size, const std::function<Status(Communicator&)>& fn, int ranks_per_node = 0,
             std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace dltune::comm
