#include "topology/isolated_load.h"

#include <cerrno>
#include <chrono>
#include <csignal>

#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "topology/model_json.h"

#if defined(__SANITIZE_ADDRESS__)
#define DLTUNE_ISOLATED_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DLTUNE_ISOLATED_ASAN 1
#endif
#endif

namespace dltune::topology {
namespace {

constexpr size_t kMaxAnswerBytes = size_t{64} << 20;

struct ChildSetup {
  char* const* argv;
  char* const* envp;
  int devnull;
  int out;  // write end of the answer pipe
  int cpu_seconds;
  uint64_t memory_bytes;
  bool drop;
  uid_t uid;
  gid_t gid;
};

// Only async-signal-safe calls from here on: the child of a possibly multi-threaded host.
[[noreturn]] void exec_child(const ChildSetup& c) {
  ::setpgid(0, 0);
  ::dup2(c.devnull, 0);
  ::dup2(c.out, 1);
  ::dup2(c.devnull, 2);
  // No descriptor of the host (sockets, credentials) reaches the helper.
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  if (c.drop) {
    // slurmstepd may have lowered only its effective uid: take root back (its real and saved
    // uid are 0) so that the supplementary groups can be dropped too, then drop everything.
    if (::geteuid() != 0) (void)::seteuid(0);
    if (::setgroups(1, &c.gid) != 0 || ::setresgid(c.gid, c.gid, c.gid) != 0 ||
        ::setresuid(c.uid, c.uid, c.uid) != 0) {
      ::_exit(126);
    }
    if (::getuid() != c.uid || ::geteuid() != c.uid || ::getgid() != c.gid) ::_exit(126);
    if (c.uid != 0 && (::setuid(0) == 0 || ::seteuid(0) == 0)) ::_exit(126);
  }
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  const rlimit cpu{static_cast<rlim_t>(c.cpu_seconds), static_cast<rlim_t>(c.cpu_seconds)};
  ::setrlimit(RLIMIT_CPU, &cpu);
  if (c.memory_bytes != 0) {
    const rlimit as{static_cast<rlim_t>(c.memory_bytes), static_cast<rlim_t>(c.memory_bytes)};
    ::setrlimit(RLIMIT_AS, &as);
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::execve(c.argv[0], c.argv, c.envp);
  ::_exit(127);
}

void kill_and_reap(pid_t pid, int* status) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
}

// Reads everything the child writes until EOF, at most kMaxAnswerBytes, before `deadline`.
// False on timeout or an oversized answer.
bool read_answer(int fd, std::chrono::steady_clock::time_point deadline, std::string* out,
                 bool* too_big) {
  char buf[65536];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;  // EOF (or an error: what we have is the answer)
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > kMaxAnswerBytes) {
      *too_big = true;
      return false;
    }
  }
}

// The helper started: its pid (its own process group) and the read end of its answer's pipe.
struct Helper {
  pid_t pid = -1;
  int answer_fd = -1;
};

// Starts the helper of `req` with the request's environment, limits and user, its stdin and
// stderr on /dev/null. Errors: the pipe, /dev/null or fork (nothing left open).
Result<Helper> start_helper(const IsolatedLoad& req) {
  std::vector<std::string> args = {req.helper};
  if (!req.xml_path.empty()) args.insert(args.end(), {"--xml", req.xml_path});
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : req.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return errno_error("pipe");
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) {
    const Error e = errno_error("cannot open /dev/null");
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return e;
  }
  ChildSetup setup{argv.data(),
                   envp.data(),
                   devnull,
                   pipe_fds[1],
                   req.cpu_seconds,
                   req.memory_bytes,
                   req.run_as.has_value(),
                   0,
                   0};
#ifdef DLTUNE_ISOLATED_ASAN
  setup.memory_bytes = 0;  // AddressSanitizer reserves terabytes of address space
#endif
  if (req.run_as) std::tie(setup.uid, setup.gid) = *req.run_as;
  const pid_t pid = ::fork();
  if (pid < 0) {
    const Error e = errno_error("fork");
    ::close(devnull);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return e;
  }
  if (pid == 0) exec_child(setup);
  ::close(devnull);
  ::close(pipe_fds[1]);
  ::setpgid(pid, pid);
  return Helper{pid, pipe_fds[0]};
}

// The topology from the helper's exit `status` and `answer`: a crash or a failure with its
// sentence (invalid_input where the user's XML is to blame: exit code 2, or any failure on a
// file), else the model it wrote. `what` opens the messages.
Result<Topology> judge_helper(const IsolatedLoad& req, const std::string& what, int status,
                              const std::string& answer) {
  const auto bad = [&](const std::string& m) {
    return req.xml_path.empty() ? internal_error(m) : invalid_input(m);
  };
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return bad(what + ": hwloc crashed (signal " + std::to_string(sig) +
               (sig == SIGXCPU || sig == SIGKILL ? ", a resource limit" : "") +
               ") in the topology helper");
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  if (code == 126 || code == 127) {
    return internal_error("cannot run the topology helper '" + req.helper + "' (status " +
                          std::to_string(code) + ")");
  }
  if (code != 0) {
    // The helper's answer is one sentence saying what is wrong.
    std::string msg = answer.substr(0, 1000);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == '\r')) msg.pop_back();
    if (msg.empty())
      msg = what + ": the topology helper exited with status " + std::to_string(code);
    return code == 2 ? invalid_input(msg) : internal_error(msg);
  }
  auto topo = model_from_json(answer);
  if (!topo) return internal_error(what + ": " + topo.error().message());
  return topo;
}

}  // namespace

Result<Topology> load_isolated(const IsolatedLoad& req) {
  if (req.helper.empty() || req.helper[0] != '/') {
    return internal_error("no absolute path to dltune-topo-probe");
  }
  const std::string what =
      req.xml_path.empty() ? "discovering this machine" : "loading '" + req.xml_path + "'";
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(req.timeout_ms);
  auto helper = start_helper(req);
  if (!helper) return helper.error();
  const pid_t pid = helper->pid;
  std::string answer;
  bool too_big = false;
  const bool complete = read_answer(helper->answer_fd, deadline, &answer, &too_big);
  ::close(helper->answer_fd);
  int status = 0;
  if (!complete) {
    kill_and_reap(pid, &status);
    if (too_big) return internal_error(what + ": the topology helper wrote too much");
    return timeout_error(what + " took longer than " + std::to_string(req.timeout_ms / 1000) +
                         " s; the topology helper was killed");
  }
  // EOF: the child closed its end (normally by exiting); give it until the deadline to go.
  pid_t r = 0;
  while ((r = ::waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    const timespec tick{0, 2 * 1000 * 1000};
    ::nanosleep(&tick, nullptr);
  }
  if (r == 0) {
    kill_and_reap(pid, &status);
    return timeout_error(what + ": the topology helper did not exit");
  }
  if (r < 0 && errno == ECHILD) {
    // A host that ignores SIGCHLD has its children reaped for it: the status is gone, and only a
    // whole model counts as success.
    auto topo = model_from_json(answer);
    if (!topo) return internal_error(what + ": the topology helper's status was lost");
    return topo;
  }
  if (r < 0) return errno_error("waiting for the topology helper");
  return judge_helper(req, what, status, answer);
}

std::string sibling_bin(const std::string& name) {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&sibling_bin), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  std::string self = info.dli_fname;
  if (self.empty() || self[0] != '/') {
    // A program (not a shared object) reports its argv[0]: use /proc/self/exe instead.
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return "";
    self.assign(buf, static_cast<size_t>(n));
  }
  const size_t slash = self.rfind('/');
  if (slash == std::string::npos) return "";
  return self.substr(0, slash) + "/../bin/" + name;
}

}  // namespace dltune::topology
