#include "launcher/backend/node_hub.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/json_input.h"
#include "common/log.h"
#include "common/strings.h"
#include "launcher/backend/node_link.h"

namespace dltune::launcher {
namespace {

// A connection's peer as text: "10.0.0.2" (IPv4-mapped IPv6 addresses as IPv4).
std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  }
  std::string s = buf;
  if (strings::starts_with(s, "::ffff:") && s.find('.') != std::string::npos) s = s.substr(7);
  return s;
}

void set_recv_timeout(int fd, int seconds) {
  timeval tv{seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

// One fence in progress: the data of each node taking part (nullopt: not yet sent).
struct FenceState {
  std::vector<int> nodes;
  std::map<int, std::string> data;
};

}  // namespace

class NodeHub::Impl {
 public:
  std::vector<std::string> hosts;
  std::string token;
  int listen_fd = -1;
  int wake_fd = -1;   // eventfd: the destructor ends the thread
  int event_fd = -1;  // the owner's: a failure was recorded
  std::thread thread;

  mutable std::mutex mu;
  std::vector<int> links;  // per node; -1 until it said hello, again -1 once closed
  std::vector<bool> ended;
  Failure failure;
  std::string failed_host;
  std::vector<std::optional<LaunchOutcome>> outcomes;
  bool stopped = false;
  std::mutex send_mu;                                    // one writer per socket at a time
  std::map<std::string, std::deque<FenceState>> fences;  // hub thread only

  void record_failure(const Failure& f, const std::string& host) {
    {
      std::lock_guard lock(mu);
      if (!failure.why.empty()) return;
      failure = f;
      failed_host = host;
    }
    const uint64_t one = 1;
    (void)!write(event_fd, &one, sizeof one);
  }
  // Locks send_mu, then mu (the order everywhere), so that the link cannot close meanwhile.
  void send(int node, NodeFrame type, const std::string& payload) {
    std::lock_guard send_lock(send_mu);
    int fd = -1;
    {
      std::lock_guard lock(mu);
      fd = links[static_cast<size_t>(node)];
    }
    if (fd < 0) return;
    if (Status s = send_frame(fd, type, payload); !s.ok()) {
      DLTUNE_LOG(kDebug, "launch")
          << "to " << hosts[static_cast<size_t>(node)] << ": " << s.error().message();
    }
  }

  bool accept_all(const MakeJobs& make_jobs, std::chrono::seconds timeout);
  bool hello(int fd, std::vector<NodeHello>& hellos);
  void serve();
  void on_frame(int node, Frame f);
  void fence(int node, const std::string& payload);
};

// Waits for every daemon's hello, then sends the jobs. false: the hub is shutting down, or not
// every node connected in time (a failure is recorded).
bool NodeHub::Impl::accept_all(const MakeJobs& make_jobs, std::chrono::seconds timeout) {
  const size_t n = hosts.size();
  std::vector<NodeHello> hellos(n);
  std::vector<int> pending;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    size_t have = 0;
    {
      std::lock_guard lock(mu);
      for (int fd : links) have += fd >= 0 ? 1 : 0;
    }
    if (have == n) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      std::vector<std::string> missing;
      {
        std::lock_guard lock(mu);
        for (size_t k = 0; k < n; ++k) {
          if (links[k] < 0) missing.push_back(hosts[k]);
        }
      }
      for (int fd : pending) close(fd);
      record_failure(
          {"the node daemon on " + strings::join(missing, ", ") +
               " did not connect back to the launcher within " + std::to_string(timeout.count()) +
               " s (can that host reach this one's TCP port " + "?)",
           1},
          missing.empty() ? "" : missing[0]);
      return false;
    }
    std::vector<pollfd> fds{{wake_fd, POLLIN, 0}, {listen_fd, POLLIN, 0}};
    for (int fd : pending) fds.push_back({fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left.count(), 1000))) < 0) {
      continue;
    }
    if (fds[0].revents != 0) {
      for (int fd : pending) close(fd);
      return false;
    }
    if (fds[1].revents & POLLIN) {
      const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        keep_alive(fd);
        set_recv_timeout(fd, 10);  // a hello is one small frame
        pending.push_back(fd);
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int fd = fds[i].fd;
      pending.erase(std::find(pending.begin(), pending.end(), fd));
      if (!hello(fd, hellos)) close(fd);
    }
  }
  const std::vector<std::string> jobs = make_jobs(hellos);
  for (size_t k = 0; k < n; ++k) {
    int fd = -1;
    {
      std::lock_guard lock(mu);
      fd = links[k];
    }
    set_recv_timeout(fd, 0);
    send(static_cast<int>(k), NodeFrame::kJob, jobs[k]);
  }
  return true;
}

// Reads a daemon's hello from `fd`; true when it is a node's first, with the right token.
bool NodeHub::Impl::hello(int fd, std::vector<NodeHello>& hellos) {
  auto f = recv_frame(fd);
  if (!f || f->type != NodeFrame::kHello) return false;
  auto j = parse_json_bounded(f->payload, {.max_bytes = 4096, .max_depth = 2});
  if (!j || !j->is_object()) return false;
  const auto& o = *j;
  if (!o.contains("token") || !o["token"].is_string() || o["token"] != token ||
      !o.contains("node") || !o["node"].is_number_integer()) {
    DLTUNE_LOG(kWarn, "launch") << "a connection from " << peer_address(fd)
                                << " to the node port was not one of this job's daemons; closed";
    return false;
  }
  const int64_t node = o["node"];
  std::lock_guard lock(mu);
  if (node < 0 || node >= static_cast<int64_t>(hosts.size()) ||
      links[static_cast<size_t>(node)] >= 0) {
    return false;
  }
  NodeHello& h = hellos[static_cast<size_t>(node)];
  h.node = static_cast<int>(node);
  h.peer = peer_address(fd);
  h.head = o.value("head", std::string());
  h.master_port = o.value("master_port", 0);
  links[static_cast<size_t>(node)] = fd;
  return true;
}

void NodeHub::Impl::fence(int node, const std::string& payload) {
  std::string key, data;
  if (Status s = split_fence_payload(payload, &key, &data); !s.ok()) return;
  std::deque<FenceState>& q = fences[key];
  // This node's next fence of this key: the first one it has not contributed to.
  auto it =
      std::find_if(q.begin(), q.end(), [&](const FenceState& f) { return !f.data.count(node); });
  if (it == q.end()) {
    FenceState f;
    const std::string nodes = key.substr(0, key.find(';'));
    for (const std::string& k : strings::split(nodes, ',')) {
      auto v = strings::parse_int(k);
      if (v && *v < static_cast<int64_t>(hosts.size())) f.nodes.push_back(static_cast<int>(*v));
    }
    q.push_back(std::move(f));
    it = std::prev(q.end());
  }
  DLTUNE_LOG(kDebug, "launch") << "fence " << key << ": " << data.size() << " bytes from "
                               << hosts[static_cast<size_t>(node)];
  it->data[node] = std::move(data);
  if (it != q.begin() || it->data.size() < it->nodes.size()) return;
  std::string all;
  for (const auto& [k, d] : it->data) all += d;  // node order: std::map is sorted
  const std::string release = fence_payload(key, all);
  for (int k : it->nodes) send(k, NodeFrame::kRelease, release);
  q.pop_front();
  if (q.empty()) fences.erase(key);
}

void NodeHub::Impl::on_frame(int node, Frame f) {
  const std::string& host = hosts[static_cast<size_t>(node)];
  if (f.type == NodeFrame::kFence) {
    fence(node, f.payload);
  } else if (f.type == NodeFrame::kFailed) {
    auto j = parse_json_bounded(f.payload, {.max_bytes = 1 << 20, .max_depth = 2});
    if (!j || !j->is_object()) return;
    record_failure({j->value("why", "the ranks on " + host + " failed"), j->value("exit_code", 1)},
                   host);
  } else if (f.type == NodeFrame::kDone) {
    auto o = outcome_from_json(f.payload);
    std::lock_guard lock(mu);
    if (o) outcomes[static_cast<size_t>(node)] = *o;
    ended[static_cast<size_t>(node)] = true;
  }
}

void NodeHub::Impl::serve() {
  for (;;) {
    std::vector<pollfd> fds{{wake_fd, POLLIN, 0}};
    std::vector<int> nodes;
    {
      std::lock_guard lock(mu);
      for (size_t k = 0; k < links.size(); ++k) {
        if (links[k] < 0) continue;
        fds.push_back({links[k], POLLIN, 0});
        nodes.push_back(static_cast<int>(k));
      }
    }
    if (nodes.empty()) return;
    if (poll(fds.data(), fds.size(), -1) < 0) continue;
    if (fds[0].revents != 0) return;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto f = recv_frame(fds[i].fd);
      if (f) {
        on_frame(nodes[i - 1], std::move(*f));
        continue;
      }
      std::lock_guard send_lock(send_mu);
      std::lock_guard lock(mu);
      close(links[static_cast<size_t>(nodes[i - 1])]);
      links[static_cast<size_t>(nodes[i - 1])] = -1;
    }
  }
}

Result<std::unique_ptr<NodeHub>> NodeHub::open(std::vector<std::string> hosts, std::string token) {
  std::unique_ptr<NodeHub> hub(new NodeHub());
  auto impl = std::make_unique<Impl>();
  auto fd = listen_tcp(&hub->port_);
  if (!fd) return std::move(fd).error();
  impl->listen_fd = *fd;
  impl->wake_fd = eventfd(0, EFD_CLOEXEC);
  impl->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->wake_fd < 0 || impl->event_fd < 0) {
    Error e = errno_error("eventfd");
    close(impl->listen_fd);
    if (impl->wake_fd >= 0) close(impl->wake_fd);
    if (impl->event_fd >= 0) close(impl->event_fd);
    return e;
  }
  impl->links.assign(hosts.size(), -1);
  impl->ended.assign(hosts.size(), false);
  impl->outcomes.resize(hosts.size());
  impl->hosts = std::move(hosts);
  impl->token = std::move(token);
  hub->event_fd_ = impl->event_fd;
  hub->impl_ = std::move(impl);
  return hub;
}

void NodeHub::start(MakeJobs make_jobs, std::chrono::seconds connect_timeout) {
  impl_->thread = std::thread([this, make_jobs = std::move(make_jobs), connect_timeout] {
    if (impl_->accept_all(make_jobs, connect_timeout)) impl_->serve();
  });
}

NodeHub::~NodeHub() {
  stop_all("the launcher is ending");
  const uint64_t one = 1;
  (void)!write(impl_->wake_fd, &one, sizeof one);
  if (impl_->thread.joinable()) impl_->thread.join();
  for (int fd : impl_->links) {
    if (fd >= 0) close(fd);
  }
  close(impl_->listen_fd);
  close(impl_->wake_fd);
  close(impl_->event_fd);
}

Failure NodeHub::failure() const {
  std::lock_guard lock(impl_->mu);
  return impl_->failure;
}

std::string NodeHub::failed_host() const {
  std::lock_guard lock(impl_->mu);
  return impl_->failed_host;
}

std::optional<LaunchOutcome> NodeHub::outcome(int node) const {
  std::lock_guard lock(impl_->mu);
  if (node < 0 || static_cast<size_t>(node) >= impl_->outcomes.size()) return std::nullopt;
  return impl_->outcomes[static_cast<size_t>(node)];
}

void NodeHub::stop_all(const std::string& why) {
  std::vector<int> to;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
    for (size_t k = 0; k < impl_->links.size(); ++k) {
      if (impl_->links[k] >= 0 && !impl_->ended[k]) to.push_back(static_cast<int>(k));
    }
  }
  for (int k : to) impl_->send(k, NodeFrame::kStop, why);
}

}  // namespace dltune::launcher
