#include "launcher/backend/capture.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <optional>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/strings.h"

extern char** environ;

namespace dltune::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// Reaps `pid` into `status`, waiting until `deadline` at most (polled every 20 ms; nullopt:
// as long as it takes). False when it still runs then.
bool reap_by(pid_t pid, int* status, std::optional<Clock::time_point> deadline) {
  for (;;) {
    const pid_t r = waitpid(pid, status, deadline ? WNOHANG : 0);
    if (r == pid || (r < 0 && errno != EINTR)) return true;
    if (r == 0) {
      if (Clock::now() >= *deadline) return false;
      usleep(20 * 1000);
    }
  }
}

}  // namespace

Result<std::string> capture_output(const std::vector<std::string>& argv, int timeout_ms,
                                   bool with_stderr) {
  constexpr size_t kMaxOut = size_t{1} << 20;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return errno_error("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (with_stderr) {
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  } else {
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    errno = rc;
    return errno_error("starting " + argv[0]);
  }
  std::optional<Clock::time_point> deadline;
  if (timeout_ms > 0) deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  std::string out;
  char buf[4096];
  for (;;) {
    if (deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      pollfd p{fds[0], POLLIN, 0};
      const int ready = left > 0 ? poll(&p, 1, static_cast<int>(left)) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        timed_out = true;
        break;
      }
      if (ready < 0) break;
    }
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (out.size() < kMaxOut) out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int st = 0;
  if (timed_out || !reap_by(pid, &st, deadline)) {
    kill(pid, SIGTERM);
    if (!reap_by(pid, &st, Clock::now() + std::chrono::seconds(1))) {
      kill(pid, SIGKILL);
      reap_by(pid, &st, std::nullopt);
    }
    return timeout_error(argv[0] + " did not finish within " +
                         (timeout_ms % 1000 == 0 ? std::to_string(timeout_ms / 1000) + " s"
                                                 : std::to_string(timeout_ms) + " ms"));
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::string said;
    if (with_stderr) {
      for (const std::string& line : strings::split(out, '\n'))
        if (!strings::trim(line).empty()) said = strings::trim(line);
    }
    return io_error(argv[0] + " failed (status " + std::to_string(st) + ")" +
                    (said.empty() ? "" : ": " + strings::printable(said.substr(0, 300), "")));
  }
  return out;
}

}  // namespace dltune::launcher
