// The head's end of the node links (node_link.h): one thread that accepts every node daemon's
// connection, hands each its job, carries the PMIx fences between them and records what they
// report, while the launcher's Supervisor watches the ssh processes.
//
//   auto hub = NodeHub::open(nodes, token);
//   hub->start(make_jobs, std::chrono::seconds(60));   // make_jobs: the hellos -> job texts
//   sup.watch(hub->event_fd(), [&] { return hub->failure(); });
//   ... sup.run() ...; hub->stop_all("...") when the launch stops
//
// A fence completes when every node its key names (node_link.h) has sent its data; each of
// them then gets all of it, concatenated in node order. The first `failed` frame, or nodes
// that did not all connect within the timeout, make event_fd() readable and failure() say why.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/backend/launch_spec.h"
#include "launcher/backend/supervisor.h"

namespace dltune::launcher {

// What a daemon said when it connected.
struct NodeHello {
  int node = 0;
  std::string peer;     // its address as the head sees it
  std::string head;     // the head's address as it reached it ("" when started without ssh)
  int master_port = 0;  // node 0: a port free there for PyTorch's rendezvous
};

class NodeHub {
 public:
  using MakeJobs = std::function<std::vector<std::string>(const std::vector<NodeHello>&)>;

  // Listens on every address for `nodes` daemons, each of which must present `token`, with
  // `hosts[k]` naming node k in messages. Failure: kIo when no socket can listen.
  static Result<std::unique_ptr<NodeHub>> open(std::vector<std::string> hosts, std::string token);
  // Tells the daemons to stop (when not done), closes every link and joins the thread.
  ~NodeHub();
  NodeHub(const NodeHub&) = delete;
  NodeHub& operator=(const NodeHub&) = delete;

  int port() const { return port_; }
  // Starts the thread: accepts the daemons, and once all have said hello sends node k the
  // k-th text make_jobs() returns; then relays fences until every link has closed.
  void start(MakeJobs make_jobs, std::chrono::seconds connect_timeout);
  // Readable once a failure is recorded (never drained: the Supervisor stops at the first).
  int event_fd() const { return event_fd_; }
  // The first failure a node reported, or the hub's own (a node that never connected); why ""
  // when none. Thread-safe.
  Failure failure() const;
  // The node a failure() came from ("" when none or not a node's).
  std::string failed_host() const;
  // Node k's outcome from its `done` frame; nullopt until it came. Thread-safe.
  std::optional<LaunchOutcome> outcome(int node) const;
  // Sends `stop` with `why` to every connected daemon that has not ended (once). Thread-safe.
  void stop_all(const std::string& why);

  class Impl;

 private:
  NodeHub() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  int event_fd_ = -1;
};

}  // namespace dltune::launcher
