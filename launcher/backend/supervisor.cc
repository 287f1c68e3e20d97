#include "launcher/backend/supervisor.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/shm_name.h"

namespace dltune::launcher {
namespace {

constexpr size_t kMaxLine = 64 * 1024;  // longer lines are forwarded in pieces

void write_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stdout closed: drop output, keep supervising
    off += static_cast<size_t>(n);
  }
}

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

// What the child needs between clone() and execve.
struct ExecArgs {
  const ChildSpec* spec;
  char* const* argv;
  int out_fd, err_fd, null_fd;
  const cpu_set_t* cpus;  // null: inherit
  pid_t parent;
};

// Runs in the child, which shares the launcher's memory until execve (CLONE_VM | CLONE_VFORK,
// as posix_spawn does): only system calls, nothing that allocates or writes shared state.
// The int return is clone()'s entry signature; it never returns.
[[noreturn]] int exec_child(void* p) {
  const ExecArgs& a = *static_cast<const ExecArgs*>(p);
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != a.parent) _exit(127);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGTTIN})
    sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (dup2(a.null_fd, 0) < 0 || dup2(a.out_fd, 1) < 0 || dup2(a.err_fd, 2) < 0) _exit(127);
  if (a.cpus != nullptr) sched_setaffinity(0, sizeof(cpu_set_t), a.cpus);
  execve(a.spec->path.c_str(), a.argv, a.spec->envp);
  static const char kMsg[] = "dltune: execve failed for the rank's program\n";
  (void)!write(2, kMsg, sizeof kMsg - 1);
  _exit(127);
}

}  // namespace

Supervisor::Supervisor(Options options) : options_(options) {
  if (options_.timeout_s > 0) {
    job_deadline_ =
        Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000.0));
  }
}

Supervisor::~Supervisor() {
  signal_groups(SIGKILL);
  for (Child& c : children_) {
    if (c.running) {
      int st = 0;
      while (waitpid(c.pid, &st, 0) < 0 && errno == EINTR) {
      }
      c.running = false;
    }
    if (c.out.fd >= 0) close(c.out.fd);
    if (c.err.fd >= 0) close(c.err.fd);
  }
  close_stdin_pipe();
  if (dev_null_ >= 0) close(dev_null_);
  if (signal_fd_ >= 0) close(signal_fd_);
  if (sigttin_ignored_) sigaction(SIGTTIN, &old_sigttin_, nullptr);
  if (signals_installed_) {
    // Drop signals that arrived while blocked (SIGCHLD of our children) before unblocking.
    sigset_t set = handled_signals();
    struct timespec zero {};
    siginfo_t info;
    sigdelset(&set, SIGINT);
    sigdelset(&set, SIGTERM);
    sigdelset(&set, SIGHUP);
    while (sigtimedwait(&set, &info, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
}

Status Supervisor::install_signal_handling() {
  sigset_t set = handled_signals();
  if (pthread_sigmask(SIG_BLOCK, &set, &old_mask_) != 0) return errno_error("pthread_sigmask");
  signals_installed_ = true;
  signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) return errno_error("signalfd");
  signal(SIGPIPE, SIG_IGN);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigttin_ignored_ = sigaction(SIGTTIN, &ign, &old_sigttin_) == 0;
  return ok_status();
}

Result<int> Supervisor::spawn(const ChildSpec& spec) {
  if (dev_null_ < 0) {
    dev_null_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (dev_null_ < 0) return errno_error("opening /dev/null");
  }
  int out[2], err[2], in[2] = {-1, -1};
  const bool feed_stdin = spec.stdin_from_launcher && stdin_child_ < 0;
  // A pipe for the launcher's input, or for the prefix alone.
  const bool pipe_in = feed_stdin || !spec.stdin_prefix.empty();
  if (pipe_in && pipe2(in, O_CLOEXEC) != 0) return errno_error("pipe");
  if (pipe2(out, O_CLOEXEC) != 0) {
    if (pipe_in) close(in[0]), close(in[1]);
    return errno_error("pipe");
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    if (pipe_in) close(in[0]), close(in[1]);
    return errno_error("pipe");
  }
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : spec.cpus) CPU_SET(c, &cpus);
  // Not fork(): copying the launcher's page tables for every rank cost ~10 ms a rank on this
  // kind of virtual machine (measured: 8 ranks started in ~100 ms). The child borrows the
  // launcher's memory on its own stack and this thread waits until it has called execve.
  ExecArgs args{&spec,
                argv.data(),
                out[1],
                err[1],
                pipe_in ? in[0] : dev_null_,
                spec.cpus.empty() ? nullptr : &cpus,
                getpid()};
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer takes a child running on a stack of its own inside the parent's memory
  // for a stack overflow (its sigaltstack interceptor), so sanitized builds copy the process.
  const pid_t pid = fork();
  if (pid == 0) exec_child(&args);
#else
  if (!exec_stack_) exec_stack_ = std::make_unique<char[]>(kExecStackBytes);
  char* stack_top = exec_stack_.get() + kExecStackBytes;
  stack_top -= reinterpret_cast<uintptr_t>(stack_top) % 64;
  const pid_t pid = clone(exec_child, stack_top, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
#endif
  const int fork_errno = errno;
  close(out[1]);
  close(err[1]);
  if (pipe_in) close(in[0]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    if (pipe_in) close(in[1]);
    errno = fork_errno;
    return errno_error("clone");
  }
  setpgid(pid, pid);  // also in the parent, so kill(-pid) works before the child runs
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  Child c;
  c.pid = pid;
  c.name = spec.name;
  c.host = spec.host;
  c.out.fd = out[0];
  c.err.fd = err[0];
  children_.push_back(std::move(c));
  if (feed_stdin) {
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    stdin_write_ = in[1];
    stdin_child_ = static_cast<int>(children_.size() - 1);
    stdin_buf_ = spec.stdin_prefix + stdin_buf_;  // goes first; run() writes it
  } else if (pipe_in) {
    // The prefix alone (a line or so: the pipe's buffer holds it), then the end of input.
    const std::string& p = spec.stdin_prefix;
    for (size_t at = 0; at < p.size();) {
      const ssize_t n = write(in[1], p.data() + at, p.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the child is gone already: its exit says why
      at += static_cast<size_t>(n);
    }
    close(in[1]);
  }
  DLTUNE_LOG(kDebug, "launch") << "started " << spec.name << " pid " << pid;
  return static_cast<int>(children_.size() - 1);
}

void Supervisor::watch(int fd, EventCheck check) {
  if (fd >= 0) watches_.emplace_back(fd, std::move(check));
}

std::string Supervisor::default_exit_judgement(const std::string& name, const std::string& host,
                                               int wait_status) {
  const std::string who = name + (host.empty() ? "" : " on " + host);
  if (WIFEXITED(wait_status)) {
    const int code = WEXITSTATUS(wait_status);
    return code == 0 ? "" : who + " exited with code " + std::to_string(code);
  }
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* desc = strsignal(sig);
    return who + " was killed by signal " + std::to_string(sig) + " (" +
           (desc != nullptr ? desc : "unknown") + ")";
  }
  return "";
}

int Supervisor::exit_code_for(int wait_status) {
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) != 0) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

void Supervisor::fail(const Failure& failure) {
  if (!failure_.why.empty() || signal_exit_ != 0) return;
  failure_ = failure;
  DLTUNE_LOG(kInfo, "launch") << "failure: " << failure.why << " (exit code " << failure.exit_code
                              << "); stopping the other ranks";
  tell_stop(failure);
  stop_all(SIGTERM);
}

void Supervisor::tell_stop(const Failure& f) {
  if (on_stop_called_ || !on_stop_) return;
  on_stop_called_ = true;
  on_stop_(f);
}

void Supervisor::stop_unless_ended(std::chrono::milliseconds grace, Failure failure) {
  if (overstay_at_ || stopping_) return;
  overstay_at_ = Clock::now() + grace;
  overstay_ = std::move(failure);
}

void Supervisor::signal_groups(int sig) {
  for (const Child& c : children_) {
    if (c.running && c.pid > 0) kill(-c.pid, sig);
  }
}

void Supervisor::stop_all(int sig) {
  stopping_ = true;
  signal_groups(sig);
  if (!kill_at_) kill_at_ = Clock::now() + std::chrono::milliseconds(options_.kill_grace_ms);
}

void Supervisor::reap() {
  struct Reaped {
    pid_t pid;
    int status;
  };
  std::vector<Reaped> sweep;
  for (;;) {
    int st = 0;
    const pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid <= 0) break;
    sweep.push_back({pid, st});
  }
  // Several children reaped at once: judge them in the order they died, so that the rank that
  // failed first is named, not the peers that failed because of it.
  if (death_order_ && sweep.size() > 1) {
    std::stable_sort(sweep.begin(), sweep.end(), [&](const Reaped& a, const Reaped& b) {
      return death_order_->position(a.pid) < death_order_->position(b.pid);
    });
  }
  for (const Reaped& r : sweep) {
    if (death_order_) death_order_->reaped(r.pid);
    auto it = std::find_if(children_.begin(), children_.end(),
                           [&](const Child& c) { return c.pid == r.pid; });
    if (it == children_.end()) continue;
    it->running = false;
    if (static_cast<int>(it - children_.begin()) == stdin_child_) close_stdin_pipe();
    // Whatever the rank left in its group dies with it, now: once the group is empty its id
    // may be reused, so it is never signalled again.
    kill(-r.pid, SIGKILL);
    // A rank killed while it made a node-shared segment leaves it in /dev/shm (common/shm_name.h).
    if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) remove_shm_segments_of(r.pid);
    const int index = static_cast<int>(it - children_.begin());
    const std::string why =
        judge_ ? judge_(index, r.status) : default_exit_judgement(it->name, it->host, r.status);
    DLTUNE_LOG(kDebug, "launch") << it->name << " ended, status " << r.status;
    it->verdict = {why, why.empty() ? 0 : exit_code_for(r.status)};
    if (why.empty() || stopping_) continue;
    Failure& slot = WIFSIGNALED(r.status) ? by_signal_ : by_exit_;
    if (slot.why.empty()) slot = it->verdict;
    if (!decide_at_) decide_at_ = Clock::now() + kSettle;
    if (!cause_wait_until_) cause_wait_until_ = Clock::now() + kCauseWait;
  }
}

// Names the hinted child when its exit is a failure (true); waits for it while it is still
// running (true, decide_at_ re-armed). False: it names nothing.
bool Supervisor::decide_by_hint(int hint) {
  if (hint < 0 || static_cast<size_t>(hint) >= children_.size()) return false;
  const Child& c = children_[static_cast<size_t>(hint)];
  if (c.running && cause_wait_until_ && Clock::now() < *cause_wait_until_) {
    decide_at_ = Clock::now() + std::chrono::milliseconds(10);  // it is dying: wait for it
    return true;
  }
  if (!c.running && !c.verdict.why.empty()) {
    fail(c.verdict);
    return true;
  }
  return false;
}

// The cause, in order of trust: the first child an observer saw lost (it died or left
// without finalizing); a child killed by a signal; the first child that finalized and then
// failed (its peers' fences break once it has gone, and it may exit after them); the first
// failed exit reaped (in death order).
void Supervisor::decide() {
  decide_at_.reset();
  const CauseHints hints = cause_hint_ ? cause_hint_() : CauseHints{};
  DLTUNE_LOG(kDebug, "launch") << "deciding: first lost " << hints.lost << ", first finalized "
                               << hints.finalized;
  if (decide_by_hint(hints.lost)) return;
  if (!by_signal_.why.empty()) {
    fail(by_signal_);
    return;
  }
  if (decide_by_hint(hints.finalized)) return;
  if (!by_exit_.why.empty()) fail(by_exit_);
}

void Supervisor::handle_signals() {
  signalfd_siginfo si;
  while (read(signal_fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    const int sig = static_cast<int>(si.ssi_signo);
    if (sig == SIGCHLD) {
      reap();
      continue;
    }
    if (sig == SIGINT && ++sigint_count_ >= 2) {
      signal_groups(SIGKILL);  // second Ctrl-C: no more grace
      continue;
    }
    if (signal_exit_ == 0 && failure_.why.empty()) signal_exit_ = 128 + sig;
    const char* abbrev = sigabbrev_np(sig);
    tell_stop({std::string("interrupted by SIG") + (abbrev != nullptr ? abbrev : "?"), 128 + sig});
    stop_all(sig == SIGINT ? options_.interrupt_signal : SIGTERM);
  }
  reap();  // SIGCHLD may have been merged with another signal
}

void Supervisor::emit(int index, bool is_stderr, std::string_view line) {
  std::optional<std::string> text;
  if (filter_) {
    text = filter_(index, is_stderr, line);
  } else if (options_.tag_output) {
    text = "[" + std::to_string(index) + "] " + std::string(line);
  } else {
    text = std::string(line);
  }
  if (!text) return;
  text->push_back('\n');
  write_all(is_stderr ? 2 : 1, *text);
}

void Supervisor::close_stdin_pipe() {
  if (stdin_write_ >= 0) close(stdin_write_);
  stdin_write_ = -1;
  stdin_buf_.clear();
}

// One step of the stdin forwarding: `in_events` are fd 0's poll events (it is readable, or at
// its end), `out_events` the child's pipe's (writable, or closed by the child).
void Supervisor::forward_stdin(short in_events, short out_events) {
  if (in_events != 0) {
    char buf[65536];
    const ssize_t n = (in_events & POLLNVAL) ? 0 : read(0, buf, sizeof buf);
    if (n > 0) {
      stdin_buf_.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      stdin_eof_ = true;  // end of input, a terminal we may not read (EIO), or no stdin
    }
  }
  if (out_events & (POLLERR | POLLHUP | POLLNVAL)) {
    close_stdin_pipe();  // the child closed its stdin: the rest has nowhere to go
    return;
  }
  while (!stdin_buf_.empty() && stdin_write_ >= 0) {
    const ssize_t n = write(stdin_write_, stdin_buf_.data(), stdin_buf_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) {
      close_stdin_pipe();
      return;
    }
    stdin_buf_.erase(0, static_cast<size_t>(n));
  }
  if (stdin_eof_ && stdin_buf_.empty()) close_stdin_pipe();
}

void Supervisor::read_stream(int index, Stream& s, bool is_stderr) {
  char buf[16384];
  for (;;) {
    const ssize_t n = read(s.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: wait for more
    if (n == 0) {
      if (!s.pending.empty()) emit(index, is_stderr, s.pending);
      s.pending.clear();
      close(s.fd);
      s.fd = -1;
      return;
    }
    s.pending.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = s.pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      emit(index, is_stderr, std::string_view(s.pending).substr(start, nl - start));
    }
    s.pending.erase(0, start);
    if (s.pending.size() > kMaxLine) {
      emit(index, is_stderr, s.pending);
      s.pending.clear();
    }
  }
}

bool Supervisor::any_running() const {
  return std::any_of(children_.begin(), children_.end(), [](const Child& c) { return c.running; });
}

bool Supervisor::any_stream_open() const {
  return std::any_of(children_.begin(), children_.end(),
                     [](const Child& c) { return c.out.fd >= 0 || c.err.fd >= 0; });
}

int Supervisor::poll_timeout_ms() const {
  std::optional<Clock::time_point> next;
  for (const auto& t : {job_deadline_, kill_at_, drain_until_, decide_at_, overstay_at_}) {
    if (t && (!next || *t < *next)) next = t;
  }
  if (!next) return -1;
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(*next - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms + 1, 0, 60'000));
}

void Supervisor::check_deadlines() {
  const auto now = Clock::now();
  if (job_deadline_ && now >= *job_deadline_) {
    job_deadline_.reset();
    std::vector<std::string> who;
    for (const Child& c : children_) {
      if (c.running) who.push_back(c.name + (c.host.empty() ? "" : " on " + c.host));
    }
    if (!who.empty()) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", options_.timeout_s);
      std::string list;
      for (size_t i = 0; i < who.size() && i < 8; ++i) list += (i ? ", " : "") + who[i];
      if (who.size() > 8) list += " and " + std::to_string(who.size() - 8) + " more";
      fail({"the job did not finish within " + std::string(secs) + " s (--timeout): " + list +
                (who.size() == 1 ? " was" : " were") + " still running",
            1});
    }
  }
  if (overstay_at_ && now >= *overstay_at_) {
    overstay_at_.reset();
    if (any_running() && !stopping_) fail(overstay_);
  }
  if (decide_at_ && now >= *decide_at_) decide();
  if (kill_at_ && now >= *kill_at_) {
    kill_at_.reset();
    signal_groups(SIGKILL);
  }
}

LaunchOutcome Supervisor::run() {
  death_order_.emplace();
  for (;;) {
    // Every child has ended: the verdict still waits for kSettle after the first failure. The
    // ranks of a small job can all end within a few ms, before libpmix has told the server
    // which rank's connection dropped first (the cause hint); deciding at once named a peer
    // that only failed because of it.
    if (!any_running() && !(decide_at_ && Clock::now() < *decide_at_)) {
      if (decide_at_) decide();
      if (!final_kill_done_) {
        final_kill_done_ = true;
        drain_until_ = Clock::now() + std::chrono::milliseconds(1000);
      }
      if (!any_stream_open() || Clock::now() >= *drain_until_) break;
    }
    std::vector<pollfd> fds;
    fds.push_back({signal_fd_, POLLIN, 0});
    for (const auto& w : watches_) fds.push_back({w.first, POLLIN, 0});
    // The launcher's stdin while the buffer is empty, else the child's pipe until it is.
    const size_t stdin_at = fds.size();
    if (stdin_write_ >= 0) {
      if (stdin_buf_.empty() && !stdin_eof_) {
        fds.push_back({0, POLLIN, 0});
      } else {
        fds.push_back({stdin_write_, POLLOUT, 0});
      }
    }
    const size_t streams_at = fds.size();
    std::vector<std::pair<int, bool>> owners;  // child index, is_stderr
    for (size_t i = 0; i < children_.size(); ++i) {
      if (children_[i].out.fd >= 0) {
        fds.push_back({children_[i].out.fd, POLLIN, 0});
        owners.emplace_back(static_cast<int>(i), false);
      }
      if (children_[i].err.fd >= 0) {
        fds.push_back({children_[i].err.fd, POLLIN, 0});
        owners.emplace_back(static_cast<int>(i), true);
      }
    }
    const int rc = poll(fds.data(), fds.size(), poll_timeout_ms());
    if (rc < 0 && errno != EINTR) break;
    if (rc > 0) {
      if (fds[0].revents != 0) handle_signals();
      for (size_t w = 0; w < watches_.size(); ++w) {
        if (fds[1 + w].revents == 0) continue;
        const Failure f = watches_[w].second();
        if (!f.why.empty() && !stopping_) fail(f);
      }
      if (streams_at > stdin_at && fds[stdin_at].revents != 0) {
        const bool is_in = fds[stdin_at].fd == 0;
        forward_stdin(is_in ? fds[stdin_at].revents : 0, is_in ? 0 : fds[stdin_at].revents);
      }
      for (size_t k = 0; k < owners.size(); ++k) {
        if (fds[streams_at + k].revents == 0) continue;
        Child& c = children_[static_cast<size_t>(owners[k].first)];
        read_stream(owners[k].first, owners[k].second ? c.err : c.out, owners[k].second);
      }
    }
    check_deadlines();
  }
  death_order_.reset();
  LaunchOutcome out;
  if (!failure_.why.empty()) {
    out.exit_code = failure_.exit_code;
    out.message = failure_.why;
  } else if (signal_exit_ != 0) {
    out.exit_code = signal_exit_;
    out.interrupted = true;
    const int sig = signal_exit_ - 128;
    out.message = std::string("interrupted by ") +
                  (sig == SIGINT    ? "SIGINT"
                   : sig == SIGTERM ? "SIGTERM"
                                    : "SIGHUP") +
                  "; stopped all ranks";
  }
  return out;
}

}  // namespace dltune::launcher
