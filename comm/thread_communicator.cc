#include "comm/thread_communicator.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

namespace dltune::comm {
namespace detail {

// Per world rank, the messages sent to it, by (context, source world rank, tag), in order.
struct ThreadFabric {
  struct Mailbox {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::tuple<long long, int, int>, std::deque<std::vector<uint8_t>>> queues;
  };
  explicit ThreadFabric(int size) : boxes(static_cast<size_t>(size)) {}
  std::deque<Mailbox> boxes;  // deque: Mailbox is not movable
};

}  // namespace detail

std::vector<std::unique_ptr<ThreadCommunicator>> ThreadCommunicator::create_group(
    int size, int ranks_per_node) {
  DLTUNE_CHECK(size >= 1 && ranks_per_node >= 0, "bad thread group shape");
  auto fabric = std::make_shared<detail::ThreadFabric>(size);
  std::vector<int> members(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) members[static_cast<size_t>(r)] = r;
  std::vector<std::unique_ptr<ThreadCommunicator>> out;
  for (int r = 0; r < size; ++r) {
    out.push_back(std::make_unique<ThreadCommunicator>(fabric, 1, members, r, ranks_per_node));
  }
  return out;
}

ThreadCommunicator::ThreadCommunicator(std::shared_ptr<detail::ThreadFabric> fabric,
                                       long long context, std::vector<int> members, int rank,
                                       int ranks_per_node)
    : fabric_(std::move(fabric)),
      context_(context),
      members_(std::move(members)),
      rank_(rank),
      ranks_per_node_(ranks_per_node) {}

ThreadCommunicator::~ThreadCommunicator() { stop_comm_thread(); }

std::string ThreadCommunicator::describe() const {
  return "thread communicator rank " + std::to_string(rank_) + " of " + std::to_string(size());
}

Status ThreadCommunicator::send(int dst, int tag, const void* data, size_t bytes, Deadline) {
  DLTUNE_CHECK(dst >= 0 && dst < size(), "send to a rank outside the communicator");
  auto& box = fabric_->boxes[static_cast<size_t>(world(dst))];
  std::vector<uint8_t> msg(bytes);
  if (bytes > 0) std::memcpy(msg.data(), data, bytes);
  {
    std::lock_guard lock(box.mu);
    box.queues[{context_, world(rank_), tag}].push_back(std::move(msg));
  }
  box.cv.notify_all();
  return ok_status();
}

Status ThreadCommunicator::recv(int src, int tag, void* data, size_t bytes, Deadline deadline) {
  DLTUNE_CHECK(src >= 0 && src < size(), "recv from a rank outside the communicator");
  auto& box = fabric_->boxes[static_cast<size_t>(world(rank_))];
  std::unique_lock lock(box.mu);
  auto& q = box.queues[{context_, world(src), tag}];
  if (!box.cv.wait_until(lock, deadline, [&] { return !q.empty(); })) {
    return timeout_error("rank " + std::to_string(src) + " sent nothing with tag " +
                         std::to_string(tag) + " in time (dead peer or mismatched calls?)");
  }
  std::vector<uint8_t> msg = std::move(q.front());
  q.pop_front();
  lock.unlock();
  if (msg.size() != bytes) {
    return invalid_input("rank " + std::to_string(src) + " sent " + std::to_string(msg.size()) +
                         " bytes, rank " + std::to_string(rank_) + " expected " +
                         std::to_string(bytes) + ": do all ranks pass the same count?");
  }
  if (bytes > 0) std::memcpy(data, msg.data(), bytes);
  return ok_status();
}

Status ThreadCommunicator::sendrecv(int dst, int send_tag, const void* send_data, size_t send_bytes,
                                    int src, int recv_tag, void* recv_data, size_t recv_bytes,
                                    Deadline deadline) {
  DLTUNE_TRY(send(dst, send_tag, send_data, send_bytes, deadline));  // buffered: never blocks
  return recv(src, recv_tag, recv_data, recv_bytes, deadline);
}

int ThreadCommunicator::node_count() {
  if (ranks_per_node_ == 0) return 1;
  int nodes = 0, last = -1;
  for (int w : members_) {  // members are ascending, so nodes appear in order
    if (w / ranks_per_node_ != last) ++nodes, last = w / ranks_per_node_;
  }
  return nodes;
}

Communicator& ThreadCommunicator::local() {
  if (!subs_made_) {
    subs_made_ = true;
    auto node = [&](int w) { return ranks_per_node_ == 0 ? 0 : w / ranks_per_node_; };
    const int my_node = node(world(rank_));
    std::vector<int> local_members, leader_members;
    int local_rank = 0, leader_rank = -1, last = -1;
    for (int w : members_) {
      if (node(w) == my_node) {
        if (w == world(rank_)) local_rank = static_cast<int>(local_members.size());
        local_members.push_back(w);
      }
      if (node(w) != last) {
        last = node(w);
        if (w == world(rank_)) leader_rank = static_cast<int>(leader_members.size());
        leader_members.push_back(w);
      }
    }
    if (local_members.size() != members_.size()) {
      local_ = std::make_unique<ThreadCommunicator>(fabric_, context_ * 4 + 1, local_members,
                                                    local_rank, ranks_per_node_);
    }
    if (leader_rank >= 0) {
      leaders_ = std::make_unique<ThreadCommunicator>(fabric_, context_ * 4 + 2, leader_members,
                                                      leader_rank, ranks_per_node_);
    }
  }
  return local_ ? *local_ : *this;
}

Communicator* ThreadCommunicator::leaders() {
  local();
  return leaders_.get();
}

Status spawn(int size, const std::function<Status(Communicator&)>& fn, int ranks_per_node,
             std::chrono::milliseconds timeout) {
  auto comms = ThreadCommunicator::create_group(size, ranks_per_node);
  std::vector<Status> results(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    comms[static_cast<size_t>(r)]->set_timeout(timeout);
    threads.emplace_back(
        [&, r] { results[static_cast<size_t>(r)] = fn(*comms[static_cast<size_t>(r)]); });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) {
    if (!results[static_cast<size_t>(r)]) {
      return results[static_cast<size_t>(r)].error().wrap("rank " + std::to_string(r));
    }
  }
  return ok_status();
}

}  // namespace dltune::comm
