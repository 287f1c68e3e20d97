#include "launcher/backend/ssh_backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/env.h"
#include "common/json_input.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/strings.h"
#include "launcher/backend/capture.h"
#include "launcher/backend/env_block.h"
#include "launcher/backend/local_backend.h"
#include "launcher/backend/node_hub.h"
#include "launcher/backend/node_link.h"
#include "launcher/backend/plan_env.h"
#include "launcher/backend/rank_env.h"
#include "launcher/backend/rank_program.h"
#include "launcher/backend/slurm_backend.h"
#include "launcher/backend/supervisor.h"

extern char** environ;

namespace dltune::launcher {
namespace {

using nlohmann::json;

constexpr const char* kTokenVar = "DLTUNE_NODE_TOKEN";
constexpr std::chrono::seconds kConnectTimeout{60};

// 'text' for a POSIX shell: the remote command line ssh hands to the login shell.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

const char* bind_name(topology::BindPolicy b) {
  switch (b) {
    case topology::BindPolicy::kCore:
      return "core";
    case topology::BindPolicy::kNuma:
      return "numa";
    case topology::BindPolicy::kNone:
      return "none";
    case topology::BindPolicy::kAuto:
      break;
  }
  return "auto";
}
const char* map_name(topology::MapPolicy m) {
  switch (m) {
    case topology::MapPolicy::kNuma:
      return "numa";
    case topology::MapPolicy::kSocket:
      return "socket";
    case topology::MapPolicy::kBlock:
      break;
  }
  return "core";
}

// Node k's job: everything its daemon needs to start its ranks as the head was asked to.
std::string job_text(const LaunchSpec& spec, const std::vector<NodeRanks>& nodes, int k,
                     const std::string& nspace, const std::string& master_addr, int master_port) {
  json j;
  j["argv"] = spec.argv;
  j["nranks"] = spec.nranks;
  j["node"] = k;
  j["nspace"] = nspace;
  j["master_addr"] = master_addr;
  j["master_port"] = master_port;
  json ns = json::array();
  for (const NodeRanks& n : nodes) ns.push_back({n.host, n.first_rank, n.count});
  j["nodes"] = ns;
  j["bind"] = bind_name(spec.bind);
  j["bind_from_user"] = spec.bind_from_user;
  j["map"] = map_name(spec.map);
  j["map_from_user"] = spec.map_from_user;
  j["output"] = {{"dir", spec.output.dir},
                 {"copy", spec.output.copy},
                 {"tag", spec.output.tag},
                 {"timestamp", spec.output.timestamp}};
  j["kill_grace_ms"] = spec.kill_grace_ms;
  j["plan"] = spec.plan_blob;
  j["recipe"] = spec.recipe_blob;
  j["env"] = spec.extra_env;
  return j.dump();
}

// The daemon's side of job_text(). Failure: kInvalidInput when it is not one.
Result<LaunchSpec> spec_from_job(const std::string& text, NodeShare* share) {
  auto parsed = parse_json_bounded(text, {.max_bytes = kMaxFrameBytes, .max_depth = 4});
  if (!parsed) return std::move(parsed).error().wrap("the job from the launcher");
  try {
    const json& j = *parsed;
    LaunchSpec spec;
    spec.argv = j.at("argv").get<std::vector<std::string>>();
    spec.nranks = j.at("nranks").get<int>();
    share->node = j.at("node").get<int>();
    share->nspace = j.at("nspace").get<std::string>();
    share->master_addr = j.at("master_addr").get<std::string>();
    share->master_port = j.at("master_port").get<int>();
    for (const json& n : j.at("nodes")) {
      share->nodes.push_back({n.at(0).get<std::string>(), n.at(1).get<int>(), n.at(2).get<int>()});
    }
    if (share->node < 0 || static_cast<size_t>(share->node) >= share->nodes.size()) {
      return invalid_input("the job from the launcher: node index out of range");
    }
    auto bind = topology::parse_bind_policy(j.at("bind").get<std::string>());
    auto map = topology::parse_map_policy(j.at("map").get<std::string>());
    if (!bind || !map) return invalid_input("the job from the launcher: bad bind or map");
    spec.bind = *bind;
    spec.bind_from_user = j.at("bind_from_user").get<bool>();
    spec.map = *map;
    spec.map_from_user = j.at("map_from_user").get<bool>();
    const json& o = j.at("output");
    spec.output.dir = o.at("dir").get<std::string>();
    spec.output.copy = o.at("copy").get<bool>();
    spec.output.tag = o.at("tag").get<bool>();
    spec.output.timestamp = o.at("timestamp").get<bool>();
    spec.kill_grace_ms = j.at("kill_grace_ms").get<int>();
    spec.plan_blob = j.at("plan").get<std::string>();
    spec.recipe_blob = j.at("recipe").get<std::string>();
    spec.extra_env = j.at("env").get<std::vector<std::pair<std::string, std::string>>>();
    if (!spec.plan_blob.empty()) {
      auto plan = recipes::parse_plan(spec.plan_blob);
      if (!plan) return std::move(plan).error().wrap("the job's plan");
      spec.plan = std::move(*plan);
    }
    return spec;
  } catch (const json::exception& e) {
    return invalid_input(std::string("the job from the launcher: ") + e.what());
  }
}

// Where ssh's shared connections live: TMPDIR/dltune-ssh-UID, made 0700 and checked to be
// this user's own directory (not a link, not anyone else's); "" when it cannot be.
std::string mux_dir() {
  const std::string dir = paths::temp_root() + "/dltune-ssh-" + std::to_string(geteuid());
  (void)mkdir(dir.c_str(), 0700);
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 077) != 0) {
    return "";
  }
  return dir;
}

// The command that starts node k's daemon: dltune (`exe`) itself here, else through ssh.
std::vector<std::string> daemon_argv(const std::string& exe, const std::string& host, bool local,
                                     int port, int k) {
  const std::vector<std::string> args = {
      "run", "--node-of",
      (local ? std::string("127.0.0.1") : std::string("ssh")) + ":" + std::to_string(port),
      "--node-index", std::to_string(k)};
  if (local) {
    std::vector<std::string> argv{exe};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  char cwd[PATH_MAX + 1] = {};
  const std::string here = getcwd(cwd, PATH_MAX) != nullptr ? cwd : "";
  // The token comes as the first line of standard input (ChildSpec::stdin_prefix), never in a
  // command line: ssh's here and the remote shell's there are every local user's to read.
  // The shell's `read` takes one line of a pipe byte by byte, leaving the rest (the
  // launcher's input, for rank 0's node) to the daemon.
  std::string remote = "cd " + shell_quote(here) + " 2>/dev/null || cd; IFS= read -r " + kTokenVar +
                       " && export " + kTokenVar + " && exec " + shell_quote(exe);
  for (const std::string& a : args) remote += " " + shell_quote(a);
  const char* agent = std::getenv("DLTUNE_SSH");  // NOLINT: mpirun's plm_rsh_agent, ours
  std::vector<std::string> argv;
  for (const std::string& w : strings::split(agent != nullptr && *agent ? agent : "ssh", ' ')) {
    if (!w.empty()) argv.push_back(w);
  }
  // A host that dies (or whose network does) ends its ssh within about 15 s (three missed
  // keep-alives 5 s apart): the job then fails naming it, instead of waiting on TCP for hours.
  // The user's own -o options (DLTUNE_SSH) come first, and ssh keeps the first value.
  for (const char* o : {"-T", "-x", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=5", "-o",
                        "ServerAliveCountMax=3"}) {
    argv.emplace_back(o);
  }
  // One connection per host shared by the launch's many runs (a tuning's trials): the first
  // ssh leaves a master for 60 s, and the next runs skip the handshake (0.55 -> 0.29 s for a
  // 2-host job here). Not when the user's DLTUNE_SSH sets ssh's Control options itself.
  const std::string words = agent != nullptr ? agent : "";
  if (words.find("Control") == std::string::npos && words.find("control") == std::string::npos) {
    if (const std::string dir = mux_dir(); !dir.empty()) {
      for (const std::string& o : {std::string("ControlMaster=auto"), "ControlPath=" + dir + "/%C",
                                   std::string("ControlPersist=60")}) {
        argv.insert(argv.end(), {"-o", o});
      }
    }
  }
  argv.push_back(host);
  argv.push_back(remote);
  return argv;
}

}  // namespace

Result<LaunchOutcome> run_hosts(LaunchSpec spec, const std::vector<HostSlots>& hosts) {
  auto mapped = map_by_slot(hosts, spec.nranks);
  if (!mapped) return std::move(mapped).error();
  std::vector<NodeRanks> nodes = std::move(*mapped);
  spec.nranks = nodes.back().first_rank + nodes.back().count;
  DLTUNE_TRY(validate_spec(spec));
  std::vector<std::string> names;
  std::vector<bool> local;
  for (const NodeRanks& n : nodes) {
    names.push_back(n.host);
    local.push_back(is_this_host(n.host));
  }
  auto exe = cli::sibling_program("dltune");  // this very binary, as every host runs it
  if (!exe) return std::move(exe).error();
  auto token = random_token();
  if (!token) return std::move(token).error();
  auto hub = NodeHub::open(names, *token);
  if (!hub) return std::move(hub).error();
  NodeHub& h = **hub;

  Supervisor sup({false, spec.kill_grace_ms, spec.timeout_s});
  DLTUNE_TRY(sup.install_signal_handling());
  sup.watch(h.event_fd(), [&h] { return h.failure(); });
  sup.set_on_stop([&h](const Failure& f) { h.stop_all(f.why); });
  // The last lines each ssh process wrote to stderr (its own complaints: "Permission denied").
  std::vector<std::deque<std::string>> last_err(nodes.size());
  // A daemon's warning ("dltune run: warning (n2): ...") shows once when every node gives it
  // (a plan for another job shape): the first node's words stand for all.
  std::set<std::string> warned;
  sup.set_line_filter([&last_err, &warned](int index, bool is_stderr, std::string_view line) {
    if (is_stderr) {
      auto& q = last_err[static_cast<size_t>(index)];
      q.emplace_back(line);
      if (q.size() > 3) q.pop_front();
      constexpr std::string_view kWarning = "dltune run: warning (";
      if (line.substr(0, kWarning.size()) == kWarning) {
        const size_t close = line.find("): ");
        if (close != std::string_view::npos &&
            !warned.insert(std::string(line.substr(close))).second) {
          return std::optional<std::string>();
        }
      }
    }
    return std::optional<std::string>(std::string(line));
  });
  sup.set_exit_judge([&h, &names, &last_err](int index, int status) -> std::string {
    if (auto o = h.outcome(index)) return o->exit_code != 0 ? o->message : std::string();
    std::string why = Supervisor::default_exit_judgement(
        "the node daemon on " + names[static_cast<size_t>(index)], "", status);
    if (why.empty()) return why;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 255) {
      why += " (ssh's code when it cannot connect or log in, or loses the host)";
    }
    const auto& q = last_err[static_cast<size_t>(index)];
    if (!q.empty()) why += " before its ranks ended: " + q.back();
    return why;
  });

  const std::string nspace = "dltune." + std::to_string(getpid()) + "." + token->substr(0, 8);
  std::deque<EnvBlock> envs;  // each child's, alive while spawn() reads it
  for (size_t k = 0; k < nodes.size(); ++k) {
    envs.emplace_back(environ);
    if (local[k]) envs.back().set(kTokenVar, *token);
    ChildSpec child;
    child.argv = daemon_argv(*exe, nodes[k].host, local[k], h.port(), static_cast<int>(k));
    if (!local[k]) child.stdin_prefix = *token + "\n";
    auto path = find_program(child.argv[0]);
    if (!path) return std::move(path).error().wrap("starting the node daemons (DLTUNE_SSH)");
    child.path = *path;
    child.envp = envs.back().data();
    child.name = "the node daemon";
    child.host = nodes[k].host;
    child.stdin_from_launcher = k == 0;
    auto index = sup.spawn(child);
    if (!index) return std::move(index).error().wrap("starting " + child.name);
  }
  const char* user_addr = std::getenv("MASTER_ADDR");  // NOLINT: PyTorch's, the user's
  const char* user_port = std::getenv("MASTER_PORT");  // NOLINT: as above
  h.start(
      [&](const std::vector<NodeHello>& hellos) {
        // Rank 0's node as the others reach it: the address its daemon came from, or, when it
        // is this machine, the address the remote daemons reached this machine at.
        std::string addr = hellos[0].peer;
        if (local[0]) {
          addr = "127.0.0.1";
          for (const NodeHello& x : hellos) {
            if (!x.head.empty()) addr = x.head;
          }
        }
        if (user_addr != nullptr && *user_addr) addr = user_addr;
        int port = hellos[0].master_port;
        if (auto p = strings::parse_int(user_port != nullptr ? user_port : "");
            p && *p > 0 && *p < 65536) {
          port = static_cast<int>(*p);
        }
        std::vector<std::string> jobs;
        for (size_t k = 0; k < nodes.size(); ++k) {
          jobs.push_back(job_text(spec, nodes, static_cast<int>(k), nspace, addr, port));
        }
        return jobs;
      },
      kConnectTimeout);
  DLTUNE_LOG(kInfo, "launch") << "starting " << spec.nranks << " rank(s) on " << nodes.size()
                              << " node(s) through node daemons (port " << h.port() << ")";
  LaunchOutcome out = sup.run();
  if (out.exit_code != 0 && !out.interrupted && out.host.empty()) out.host = h.failed_host();
  hub->reset();  // its thread reads this frame's locals (make_jobs): ended before they are
  return out;
}

Result<int> count_host_machines(const std::vector<std::string>& hosts, int timeout_ms) {
  if (hosts.size() <= 1) return 1;
  const std::string list = host_option(hosts, 1);
  // dltune itself, found next to this program (a test's binary is not dltune).
  auto dltune = cli::sibling_program("dltune");
  if (!dltune) return dltune.error();
  auto out = capture_output({*dltune, "run", "-H", list, "--bind", "none", "--", "cat",
                             "/proc/sys/kernel/random/boot_id"},
                            timeout_ms);
  if (!out) return std::move(out).error();
  return count_boot_ids(*out, static_cast<int>(hosts.size()));
}

namespace {
constexpr std::string_view kHostSourcePrefix = "host ";
constexpr std::string_view kHostSourceSuffix = " (over ssh)";
}  // namespace

Result<topology::Topology> host_topology(const std::string& host,
                                         const std::vector<std::string>& exports, int timeout_ms) {
  auto dltune = cli::sibling_program("dltune");
  if (!dltune) return dltune.error();
  std::vector<std::string> argv = {*dltune, "run", "-H", host + ":1", "--bind", "none"};
  for (size_t i = 0; i + 1 < exports.size(); ++i) {
    if (exports[i] == "-x") argv.insert(argv.end(), {"-x", exports[++i]});
  }
  argv.insert(argv.end(), {"--", *dltune, "topo", "--export"});
  auto xml = capture_output(argv, timeout_ms);  // stderr apart: the text must be the XML
  if (!xml) return std::move(xml).error();
  const std::string source = std::string(kHostSourcePrefix) + host + std::string(kHostSourceSuffix);
  return topology::load_xml_text(*xml, source);
}

bool is_host_topology(const topology::Topology& topo) {
  const std::string& s = topo.source;
  return s.size() > kHostSourcePrefix.size() + kHostSourceSuffix.size() &&
         s.compare(0, kHostSourcePrefix.size(), kHostSourcePrefix) == 0 &&
         s.compare(s.size() - kHostSourceSuffix.size(), kHostSourceSuffix.size(),
                   kHostSourceSuffix) == 0;
}

std::optional<topology::Topology> hosts_own_topology(const std::vector<std::string>& hosts,
                                                     const std::vector<std::string>& run_options,
                                                     int timeout_ms, std::string* warning) {
  if (hosts.empty() || env::get_if_set(env::kTopoXml) ||
      std::any_of(hosts.begin(), hosts.end(),
                  [](const std::string& h) { return is_this_host(h); })) {
    return std::nullopt;
  }
  auto t = host_topology(hosts[0], run_options, timeout_ms);
  if (!t) {
    *warning = "warning: asking " + hosts[0] + " for its topology failed (" + t.error().message() +
               "); this machine's plans the job";
    return std::nullopt;
  }
  return std::move(*t);
}

Result<NodeOf> parse_node_of(const std::string& text, int node) {
  const size_t colon = text.rfind(':');
  auto port = colon == std::string::npos ? Result<int64_t>(invalid_input(""))
                                         : strings::parse_int(text.substr(colon + 1));
  if (!port || *port < 1 || *port > 65535 || colon == 0) {
    return invalid_input("--node-of expects ADDR:PORT, got '" + text + "'");
  }
  if (node < 0) return invalid_input("--node-index must be >= 0");
  NodeOf of{text.substr(0, colon), static_cast<int>(*port), node, ""};
  if (const char* t = std::getenv(kTokenVar)) of.token = t;  // NOLINT: set by the head
  unsetenv(kTokenVar);                                       // the ranks must not inherit it
  return of;
}

namespace {

// The daemon's end of the link: fences out and releases back, the head's stop.
class HeadLink {
 public:
  explicit HeadLink(int fd) : fd_(fd), stop_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~HeadLink() {
    shutdown(fd_, SHUT_RDWR);
    if (reader_.joinable()) reader_.join();
    close(fd_);
    close(stop_fd_);
  }
  int stop_fd() const { return stop_fd_; }
  std::string stop_why() {
    std::lock_guard lock(mu_);
    return stop_why_;
  }
  bool stopped_by_head() {
    std::lock_guard lock(mu_);
    return !stop_why_.empty();
  }
  Status send(NodeFrame type, const std::string& payload) {
    std::lock_guard lock(send_mu_);
    return send_frame(fd_, type, payload);
  }
  void fence(const std::string& key, std::string data, FenceDone done) {
    {
      std::lock_guard lock(mu_);
      if (!stop_why_.empty()) {
        done(false, "");
        return;
      }
      pending_[key].push_back(std::move(done));
    }
    if (!send(NodeFrame::kFence, fence_payload(key, data)).ok()) fail_pending();
  }
  // The thread blocks every signal: the Supervisor reads SIGCHLD and the others from a
  // signalfd, which only sees them while no thread lets them through.
  void start_reader() {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    reader_ = std::thread([this] {
      for (;;) {
        auto f = recv_frame(fd_);
        if (!f) {
          stop(f.error().message() + " (the launcher is gone)");
          return;
        }
        if (f->type == NodeFrame::kStop) {
          stop(f->payload.empty() ? "the launcher stopped the job" : f->payload);
        } else if (f->type == NodeFrame::kRelease) {
          std::string key, data;
          if (!split_fence_payload(f->payload, &key, &data).ok()) continue;
          FenceDone done;
          {
            std::lock_guard lock(mu_);
            auto it = pending_.find(key);
            if (it == pending_.end() || it->second.empty()) continue;
            done = std::move(it->second.front());
            it->second.pop_front();
          }
          done(true, std::move(data));
        }
      }
    });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

 private:
  void stop(const std::string& why) {
    {
      std::lock_guard lock(mu_);
      if (stop_why_.empty()) stop_why_ = why;
    }
    fail_pending();
    const uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof one);
  }
  void fail_pending() {
    std::map<std::string, std::deque<FenceDone>> pending;
    {
      std::lock_guard lock(mu_);
      pending.swap(pending_);
    }
    for (auto& [key, q] : pending) {
      for (FenceDone& d : q) d(false, "");
    }
  }
  int fd_;
  int stop_fd_;
  std::thread reader_;
  std::mutex mu_, send_mu_;
  std::string stop_why_;
  std::map<std::string, std::deque<FenceDone>> pending_;
};

}  // namespace

int run_node_daemon(const NodeOf& of) {
  auto say = [&of](const std::string& what) {
    std::fprintf(stderr, "dltune run (node daemon %d): %s\n", of.node, what.c_str());
    return 1;
  };
  std::string head = of.head;
  if (head == "ssh") {
    const char* conn = std::getenv("SSH_CONNECTION");  // NOLINT: sshd's, read once
    if (conn == nullptr) return say("--node-of ssh: SSH_CONNECTION is not set (not under ssh)");
    head = strings::split(conn, ' ')[0];
  }
  // The head listened before it started this daemon: a refused connection means it is gone
  // (interrupted while ssh was starting this), so the retries are few.
  auto fd = connect_tcp(head, of.port, 2000);
  if (!fd) return say(fd.error().message());
  HeadLink link(*fd);
  json hello = {{"node", of.node}, {"token", of.token}, {"master_port", 0}};
  if (of.head == "ssh") hello["head"] = head;
  if (of.node == 0) {
    auto port = free_tcp_port("0.0.0.0");
    if (port) hello["master_port"] = *port;
  }
  if (Status s = link.send(NodeFrame::kHello, hello.dump()); !s.ok()) {
    return say(s.error().message());
  }
  auto job = recv_frame(*fd);
  if (!job || job->type != NodeFrame::kJob) {
    return say(job ? "the launcher sent no job" : job.error().message());
  }
  NodeShare share;
  auto spec = spec_from_job(job->payload, &share);
  std::string host = share.nodes.empty() ? "" : share.nodes[static_cast<size_t>(share.node)].host;
  auto report = [&link, &host](const std::string& why, int code) {
    (void)link.send(NodeFrame::kFailed,
                    json{{"why", why}, {"exit_code", code}, {"host", host}}.dump());
  };
  if (!spec) {
    report("on " + host + ": " + spec.error().message(), 2);
    return 2;
  }
  link.start_reader();
  share.relay = [&link](const std::string& key, std::string data, FenceDone done) {
    link.fence(key, std::move(data), std::move(done));
  };
  share.stop_fd = link.stop_fd();
  share.stop_check = [&link] { return Failure{"stopped: " + link.stop_why(), 143}; };
  share.on_stop = [&link, &report](const Failure& f) {
    if (!link.stopped_by_head()) report(f.why, f.exit_code);
  };
  spec->warn = [host](const std::string& what) {
    std::fprintf(stderr, "dltune run: warning (%s): %s\n", host.c_str(), what.c_str());
  };
  auto outcome = run_local(*spec, &share);
  if (!outcome) {
    const std::string why = "on " + host + ": " + outcome.error().message();
    report(why, 1);
    (void)link.send(NodeFrame::kDone, outcome_to_json({1, why, false, host}));
    return 1;
  }
  if (outcome->host.empty() && outcome->exit_code != 0) outcome->host = host;
  (void)link.send(NodeFrame::kDone, outcome_to_json(*outcome));
  return outcome->exit_code;
}

}  // namespace dltune::launcher
