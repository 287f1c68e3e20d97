#include "plugins/slurm/tune.h"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <ctime>

#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dltune::plugins::slurm {
namespace {

bool absolute(const std::string& p) { return !p.empty() && p[0] == '/'; }

// Root-owned and not writable by group or others.
Result<struct stat> root_only_writable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno_error("cannot stat '" + path + "'");
  if (st.st_uid != 0) return invalid_input("'" + path + "' is not owned by root");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return invalid_input("'" + path + "' is writable by group or others");
  }
  return st;
}

// Only async-signal-safe calls from here on: the child of a multi-threaded slurmstepd.
[[noreturn]] void exec_child(char* const* argv, char* const* envp, int devnull, uid_t uid,
                             gid_t gid) {
  ::setpgid(0, 0);
  ::dup2(devnull, 0);
  ::dup2(devnull, 1);
  ::dup2(devnull, 2);
  // No descriptor of slurmstepd (sockets, credentials) reaches the user's program.
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  // slurmstepd lowered only its effective ids: take root back (real and saved uid are 0) so
  // that root's supplementary groups go too, then drop all three ids, group first.
  if (::geteuid() != 0) (void)::seteuid(0);
  if (::setgroups(1, &gid) != 0 || ::setresgid(gid, gid, gid) != 0 ||
      ::setresuid(uid, uid, uid) != 0) {
    ::_exit(126);
  }
  if (::getuid() != uid || ::geteuid() != uid || ::getgid() != gid || ::getegid() != gid) {
    ::_exit(126);
  }
  if (uid != 0 && (::setuid(0) == 0 || ::seteuid(0) == 0)) ::_exit(126);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // after the id change, which clears it
  ::execve(argv[0], argv, envp);
  ::_exit(127);
}

}  // namespace

TuneCommand tune_command(const TuneRequest& req) {
  TuneCommand c;
  c.argv = {req.dltune_bin, "tune", "--collectives", "-n", std::to_string(req.local_tasks)};
  if (req.max_bytes != 0) {
    c.argv.push_back("--max-bytes");
    c.argv.push_back(std::to_string(req.max_bytes));
  }
  if (absolute(req.user_db)) {
    c.argv.push_back("--db");
    c.argv.push_back(req.user_db);
  }
  c.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"};
  if (!req.site_dbs.empty()) c.env.push_back("DLTUNE_SITE_DB=" + req.site_dbs);
  if (absolute(req.topo_xml)) c.env.push_back("DLTUNE_TOPO_XML=" + req.topo_xml);
  if (absolute(req.home)) c.env.push_back("HOME=" + req.home);
  if (absolute(req.tmpdir)) c.env.push_back("TMPDIR=" + req.tmpdir);
  return c;
}

Result<std::string> trusted_binary(const std::string& path) {
  if (!absolute(path)) return invalid_input("the dltune program '" + path + "' is not absolute");
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return errno_error("cannot resolve '" + path + "'");
  const std::string real = buf;
  auto st = root_only_writable(real);
  if (!st) return std::move(st).error();
  if (!S_ISREG(st->st_mode) || (st->st_mode & S_IXOTH) == 0) {
    return invalid_input("'" + real + "' is not a regular file executable by everyone");
  }
  // Every directory up to / must be root's and not writable by others (or sticky, as /tmp:
  // there only root may rename or remove root's entries), so nobody can swap the program.
  for (std::string dir = real.substr(0, real.rfind('/'));; dir = dir.substr(0, dir.rfind('/'))) {
    const std::string d = dir.empty() ? "/" : dir;
    struct stat ds {};
    if (::stat(d.c_str(), &ds) != 0) return errno_error("cannot stat '" + d + "'");
    if (ds.st_uid != 0 ||
        ((ds.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (ds.st_mode & S_ISVTX) == 0)) {
      return invalid_input("'" + d + "' is not owned by root or is writable by others");
    }
    if (dir.empty()) break;
  }
  return real;
}

std::string default_dltune_bin() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&default_dltune_bin), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  const std::string so = info.dli_fname;
  const size_t slash = so.rfind('/');
  if (!absolute(so) || slash == std::string::npos) return "";
  return so.substr(0, slash) + "/../bin/dltune";
}

Result<int> run_as_user(const TuneCommand& cmd, uid_t uid, gid_t gid, int timeout_s) {
  if (cmd.argv.empty() || !absolute(cmd.argv[0])) return invalid_input("no absolute program");
  // Everything the child needs is built before fork.
  std::vector<char*> argv, envp;
  for (const auto& a : cmd.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : cmd.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) return errno_error("cannot open /dev/null");
  const pid_t pid = ::fork();
  if (pid < 0) {
    const Error e = errno_error("fork");
    ::close(devnull);
    return e;
  }
  if (pid == 0) exec_child(argv.data(), envp.data(), devnull, uid, gid);
  ::close(devnull);
  ::setpgid(pid, pid);  // also done by the child; whichever runs first
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return errno_error("waiting for dltune tune");
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= timeout_s) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return timeout_error("dltune tune ran past " + std::to_string(timeout_s) +
                           " s and was killed");
    }
    const timespec tick{0, 50 * 1000 * 1000};
    ::nanosleep(&tick, nullptr);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace dltune::plugins::slurm
