#include "comm/thread_communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "comm/request_state.h"

namespace dltune::comm {
namespace detail {

struct PostedRecv;

// Per world rank, the traffic addressed to it, by (context, source world rank, tag): messages
// sent before a matching receive was posted, and receives posted before their message came.
// At most one of the two queues of a channel is non-empty; empty channels are erased (tags may
// be unbounded, e.g. one per micro-batch).
struct ThreadFabric {
  using Key = std::tuple<long long, int, int>;
  struct Channel {
    std::deque<std::vector<uint8_t>> messages;
    std::deque<std::shared_ptr<PostedRecv>> posted;
    bool empty() const { return messages.empty() && posted.empty(); }
  };
  struct Mailbox {
    std::mutex mu;
    std::condition_variable cv;  // a message was queued
    std::map<Key, Channel> channels;
  };
  explicit ThreadFabric(int size) : boxes(static_cast<size_t>(size)) {}

  // The context of the sub-communicator (parent, seq, colour): fresh the first time a member
  // asks, the same for every later member. The world is context 1.
  long long context_for(long long parent, long long seq, int colour) {
    std::lock_guard lock(context_mu);
    auto [it, fresh] = contexts.try_emplace({parent, seq, colour}, next_context);
    if (fresh) ++next_context;
    return it->second;
  }

  std::deque<Mailbox> boxes;  // deque: Mailbox is not movable
  std::mutex context_mu;
  std::map<std::tuple<long long, long long, int>, long long> contexts;
  long long next_context = 2;
};

// An irecv waiting in a mailbox for its message.
struct PostedRecv final : Request::State {
  PostedRecv(ThreadFabric::Mailbox* mailbox, ThreadFabric::Key channel, void* buffer, size_t n,
             int source, int self)
      : box(mailbox), key(channel), data(buffer), bytes(n), src(source), me(self) {}

  // Copies the message in (or fails on a size mismatch) and finishes.
  void deliver(const void* msg, size_t n) {
    if (n != bytes) {
      finish(invalid_input("rank " + std::to_string(src) + " sent " + std::to_string(n) +
                           " bytes with tag " + std::to_string(std::get<2>(key)) + ", rank " +
                           std::to_string(me) + " expected " + std::to_string(bytes) +
                           ": do all ranks pass the same count?"));
      return;
    }
    if (n > 0) std::memcpy(data, msg, n);
    finish(ok_status());
  }

  // Withdraws the receive from its mailbox; when a sender has taken it already, it is being
  // delivered and stays pending for that moment.
  void expire_locked() override {
    bool withdrawn = false;
    {
      std::lock_guard lock(box->mu);
      auto it = box->channels.find(key);
      if (it != box->channels.end()) {
        auto& posted = it->second.posted;
        auto me_it =
            std::find_if(posted.begin(), posted.end(),
                         [&](const std::shared_ptr<PostedRecv>& p) { return p.get() == this; });
        if (me_it != posted.end()) {
          posted.erase(me_it);
          withdrawn = true;
          if (it->second.empty()) box->channels.erase(it);
        }
      }
    }
    if (withdrawn) {
      finish_locked(timeout_error("rank " + std::to_string(src) + " sent nothing with tag " +
                                  std::to_string(std::get<2>(key)) +
                                  " in time (dead peer or mismatched calls?)"));
    }
  }

  ThreadFabric::Mailbox* box;
  ThreadFabric::Key key;
  void* data;
  size_t bytes;
  int src;  // ranks in the communicator, for messages
  int me;
};

}  // namespace detail

namespace {
constexpr int kTagSplit = kReservedTagBase + 800;
}  // namespace

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

ThreadCommunicator::~ThreadCommunicator() {
  stop_comm_thread();
  // This context's traffic to us can never be received now: drop its messages and fail its
  // posted receives (so that nobody waits on them until their deadline).
  auto& box = fabric_->boxes[static_cast<size_t>(world(rank_))];
  std::vector<std::shared_ptr<detail::PostedRecv>> cancelled;
  {
    std::lock_guard lock(box.mu);
    for (auto it = box.channels.begin(); it != box.channels.end();) {
      if (std::get<0>(it->first) != context_) {
        ++it;
        continue;
      }
      for (auto& p : it->second.posted) cancelled.push_back(std::move(p));
      it = box.channels.erase(it);
    }
  }
  for (auto& p : cancelled) {
    p->finish(internal_error("cancelled: " + describe() + " was destroyed before rank " +
                             std::to_string(p->src) + "'s message arrived"));
  }
}

std::string ThreadCommunicator::describe() const {
  return "thread communicator rank " + std::to_string(rank_) + " of " + std::to_string(size());
}

Status ThreadCommunicator::send(int dst, int tag, const void* data, size_t bytes, Deadline) {
  DLTUNE_CHECK(dst >= 0 && dst < size(), "send to a rank outside the communicator");
  auto& box = fabric_->boxes[static_cast<size_t>(world(dst))];
  const detail::ThreadFabric::Key key{context_, world(rank_), tag};
  std::shared_ptr<detail::PostedRecv> target;
  std::vector<uint8_t> copy;  // made outside the lock, only when no receive is posted
  for (bool copied = false;;) {
    {
      std::lock_guard lock(box.mu);
      auto& ch = box.channels[key];
      if (!ch.posted.empty()) {
        target = std::move(ch.posted.front());
        ch.posted.pop_front();
        if (ch.empty()) box.channels.erase(key);
        break;
      }
      if (copied) {
        ch.messages.push_back(std::move(copy));
        break;
      }
    }
    copy.resize(bytes);
    if (bytes > 0) std::memcpy(copy.data(), data, bytes);
    copied = true;
  }
  if (target) {
    target->deliver(data, bytes);  // straight into the receiver's buffer
  } else {
    box.cv.notify_all();
  }
  return ok_status();
}

Status ThreadCommunicator::recv(int src, int tag, void* data, size_t bytes, Deadline deadline) {
  DLTUNE_CHECK(src >= 0 && src < size(), "recv from a rank outside the communicator");
  auto& box = fabric_->boxes[static_cast<size_t>(world(rank_))];
  const detail::ThreadFabric::Key key{context_, world(src), tag};
  std::unique_lock lock(box.mu);
  auto it = box.channels.find(key);
  if (it != box.channels.end() && !it->second.posted.empty()) {
    lock.unlock();  // earlier irecvs of this channel get the earlier messages
    return start_recv(src, tag, data, bytes, deadline).wait();
  }
  auto ready = [&] {
    it = box.channels.find(key);
    return it != box.channels.end() && !it->second.messages.empty();
  };
  if (!box.cv.wait_until(lock, deadline, ready)) {
    return timeout_error("rank " + std::to_string(src) + " sent nothing with tag " +
                         std::to_string(tag) + " in time (dead peer or mismatched calls?)");
  }
  std::vector<uint8_t> msg = std::move(it->second.messages.front());
  it->second.messages.pop_front();
  if (it->second.empty()) box.channels.erase(it);
  lock.unlock();
  if (msg.size() != bytes) {
    return invalid_input("rank " + std::to_string(src) + " sent " + std::to_string(msg.size()) +
                         " bytes with tag " + std::to_string(tag) + ", rank " +
                         std::to_string(rank_) + " expected " + std::to_string(bytes) +
                         ": do all ranks pass the same count?");
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

Request ThreadCommunicator::start_send(int dst, int tag, const void* data, size_t bytes,
                                       Deadline deadline) {
  return Request::finished(send(dst, tag, data, bytes, deadline));
}

Request ThreadCommunicator::start_recv(int src, int tag, void* data, size_t bytes,
                                       Deadline deadline) {
  auto& box = fabric_->boxes[static_cast<size_t>(world(rank_))];
  const detail::ThreadFabric::Key key{context_, world(src), tag};
  auto state = std::make_shared<detail::PostedRecv>(&box, key, data, bytes, src, rank_);
  state->deadline = deadline;
  std::vector<uint8_t> msg;
  bool arrived = false;
  {
    std::lock_guard lock(box.mu);
    auto& ch = box.channels[key];
    if (ch.posted.empty() && !ch.messages.empty()) {
      msg = std::move(ch.messages.front());
      ch.messages.pop_front();
      if (ch.empty()) box.channels.erase(key);
      arrived = true;
    } else {
      ch.posted.push_back(state);
    }
  }
  if (arrived) state->deliver(msg.data(), msg.size());
  return Request(state);
}

// Every rank learns every rank's (colour, key) in a ring allgather, then builds its group
// locally: the members with its colour, by key then rank. The group's context comes from the
// fabric, keyed by this communicator's context, the split's sequence number and the colour.
Result<std::unique_ptr<Communicator>> ThreadCommunicator::split_now(int colour, int key) {
  const int p = size();
  std::vector<int> all(2 * static_cast<size_t>(p));
  all[2 * static_cast<size_t>(rank_)] = colour;
  all[2 * static_cast<size_t>(rank_) + 1] = key;
  const Deadline deadline = deadline_from_now();
  for (int s = 0; s < p - 1; ++s) {
    const auto send_block = static_cast<size_t>((rank_ - s + p) % p);
    const auto recv_block = static_cast<size_t>((rank_ - s - 1 + 2 * p) % p);
    DLTUNE_TRY(sendrecv((rank_ + 1) % p, kTagSplit, &all[2 * send_block], 2 * sizeof(int),
                        (rank_ - 1 + p) % p, kTagSplit, &all[2 * recv_block], 2 * sizeof(int),
                        deadline));
  }
  const long long seq = ++splits_;
  if (colour < 0) return std::unique_ptr<Communicator>();
  std::vector<int> group;  // ranks of this communicator
  for (int r = 0; r < p; ++r) {
    if (all[2 * static_cast<size_t>(r)] == colour) group.push_back(r);
  }
  std::stable_sort(group.begin(), group.end(), [&](int a, int b) {
    return all[2 * static_cast<size_t>(a) + 1] < all[2 * static_cast<size_t>(b) + 1];
  });
  std::vector<int> members;
  int me = 0;
  for (int r : group) {
    if (r == rank_) me = static_cast<int>(members.size());
    members.push_back(world(r));
  }
  return std::unique_ptr<Communicator>(
      std::make_unique<ThreadCommunicator>(fabric_, fabric_->context_for(context_, seq, colour),
                                           std::move(members), me, ranks_per_node_));
}

int ThreadCommunicator::node_count() {
  std::vector<int> nodes;
  for (int w : members_) {
    if (std::find(nodes.begin(), nodes.end(), node_of(w)) == nodes.end()) {
      nodes.push_back(node_of(w));
    }
  }
  return static_cast<int>(nodes.size());
}

// Node-local group: the members on this rank's node, in this communicator's order. Leaders:
// the first member of each node, nodes in order of their first member (as MPI's
// split_type + split by rank give). Rail k: the k-th member of each node, in the same node
// order, when every node has the same number (> 1) of members.
Communicator& ThreadCommunicator::local() {
  if (!subs_made_) {
    subs_made_ = true;
    const int my_node = node_of(world(rank_));
    std::vector<int> local_members, leader_members, nodes;
    int local_rank = 0, leader_rank = -1;
    for (int w : members_) {
      if (node_of(w) == my_node) {
        if (w == world(rank_)) local_rank = static_cast<int>(local_members.size());
        local_members.push_back(w);
      }
      if (std::find(nodes.begin(), nodes.end(), node_of(w)) == nodes.end()) {
        nodes.push_back(node_of(w));
        if (w == world(rank_)) leader_rank = static_cast<int>(leader_members.size());
        leader_members.push_back(w);
      }
    }
    if (local_members.size() != members_.size()) {
      local_ =
          std::make_unique<ThreadCommunicator>(fabric_, fabric_->context_for(context_, -1, my_node),
                                               local_members, local_rank, ranks_per_node_);
      local_->set_timeout(timeout());
    }
    if (leader_rank >= 0) {
      leaders_ =
          std::make_unique<ThreadCommunicator>(fabric_, fabric_->context_for(context_, -2, 0),
                                               leader_members, leader_rank, ranks_per_node_);
      leaders_->set_timeout(timeout());
    }
    // Rails: members grouped by node, in node order; uniform node sizes only.
    std::vector<std::vector<int>> by_node(nodes.size());
    for (int w : members_) {
      const auto n =
          static_cast<size_t>(std::find(nodes.begin(), nodes.end(), node_of(w)) - nodes.begin());
      by_node[n].push_back(w);
    }
    const bool uniform = std::all_of(by_node.begin(), by_node.end(), [&](const auto& v) {
      return v.size() == local_members.size();
    });
    if (nodes.size() > 1 && local_members.size() > 1 && uniform) {
      std::vector<int> rail_members;
      int rail_rank = 0;
      for (const auto& node : by_node) {
        if (node[static_cast<size_t>(local_rank)] == world(rank_))
          rail_rank = static_cast<int>(rail_members.size());
        rail_members.push_back(node[static_cast<size_t>(local_rank)]);
      }
      rail_ = std::make_unique<ThreadCommunicator>(fabric_,
                                                   fabric_->context_for(context_, -3, local_rank),
                                                   rail_members, rail_rank, ranks_per_node_);
      rail_->set_timeout(timeout());
    }
  }
  return local_ ? *local_ : *this;
}

Communicator* ThreadCommunicator::rail() {
  local();
  return rail_.get();
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
