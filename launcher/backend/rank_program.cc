#include "launcher/backend/rank_program.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/progress.h"
#include "common/strings.h"

#include "dltune/config.h"

namespace dltune::cli {

Result<std::string> sibling_program(const std::string& name) {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return errno_error("finding the dltune binary");
  self[n] = '\0';
  std::string dir(self);
  dir.resize(dir.rfind('/'));
  const std::string path = dir + "/" + name;
  if (access(path.c_str(), X_OK) != 0) {
    return not_found("the rank program '" + path + "' is missing; build the '" + name + "' target");
  }
  return path;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");  // NOLINT: the system PATH, not a DLTUNE_* setting
  for (const std::string& dir : strings::split(path ? path : "", ':')) {
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

namespace {

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_forwarded = 0;

void forward_signal(int sig) {
  // The child's message about the signal starts on a line of its own, not glued to the
  // progress display (common/progress.h).
  Progress::break_line_from_signal();
  if (g_child > 0) kill(static_cast<pid_t>(g_child), sig);
  g_forwarded = sig;
}

}  // namespace

int forwarded_signal() { return g_forwarded; }

Result<int> run_to_completion(const std::vector<std::string>& argv, const std::string& command,
                              const std::string& cwd, const std::string& output) {
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::fflush(nullptr);
  // Forward SIGINT / SIGTERM exactly once to the child: it runs in its own process group, so
  // a terminal's Ctrl-C reaches it only through us (a launcher counts a second SIGINT as
  // "kill now").
  struct sigaction fwd {
  }, old_int{}, old_term{};
  fwd.sa_handler = forward_signal;
  sigemptyset(&fwd.sa_mask);
  sigaction(SIGINT, &fwd, &old_int);
  sigaction(SIGTERM, &fwd, &old_term);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    return errno_error("fork");
  }
  if (pid == 0) {
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    // A parent killed outright (SIGKILL) forwards nothing: the child hears of it all the same.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(128 + SIGTERM);  // it died before the line above
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) {
      std::fprintf(stderr, "dltune %s: cannot change to %s: %s\n", command.c_str(), cwd.c_str(),
                   std::strerror(errno));
      _exit(127);
    }
    if (!output.empty()) {
      const int fd = open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0) {
        std::fprintf(stderr, "dltune %s: cannot write %s: %s\n", command.c_str(), output.c_str(),
                     std::strerror(errno));
        _exit(127);
      }
    }
    execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "dltune %s: cannot run %s: %s\n", command.c_str(), cargv[0],
                 std::strerror(errno));
    _exit(127);
  }
  g_child = pid;
  int status = 0;
  int rc = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      rc = -1;
      break;
    }
  }
  g_child = 0;
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (rc < 0) return errno_error("waitpid");
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

std::vector<std::string> mpirun_prefix(int ranks) {
  return {"mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "pml", "ob1",
          "-np",    std::to_string(ranks)};
}

Result<std::vector<std::string>> dltune_run_prefix(int ranks) {
  auto self = sibling_program("dltune");
  if (!self) return self.error();
  return std::vector<std::string>{*self, "run", "-n", std::to_string(ranks), "--"};
}

Result<std::vector<std::string>> local_rank_launcher(int ranks) {
  if (DLTUNE_HAVE_PMIX && DLTUNE_HAVE_MPI) return dltune_run_prefix(ranks);
  if (on_path("mpirun")) return mpirun_prefix(ranks);
  return std::vector<std::string>{};
}

Result<std::vector<std::string>> local_rank_launcher_or_threads(const std::string& command,
                                                                int ranks,
                                                                std::vector<std::string>* args) {
  auto launch = local_rank_launcher(ranks);
  if (launch && launch->empty()) {
    std::fprintf(stderr,
                 "dltune %s: no launcher in this build and no mpirun on PATH; running %d ranks as "
                 "threads\n",
                 command.c_str(), ranks);
    args->push_back("--threads");
    args->push_back(std::to_string(ranks));
  }
  return launch;
}

}  // namespace dltune::cli
