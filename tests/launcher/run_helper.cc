#include "run_helper.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dltune::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

std::string binary(const std::string& name) {
  const char* dir = std::getenv("DLTUNE_BINARY_DIR");
  return std::string(dir != nullptr ? dir : ".") + "/bin/" + name;
}

RunResult run(const std::vector<std::string>& argv, const RunOptions& options) {
  char tmpl[] = "/tmp/dltune-test-out-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string out_path = dir + "/out", err_path = dir + "/err", in_path = dir + "/in";
  if (options.stdin_data != nullptr) std::ofstream(in_path) << options.stdin_data;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [k, v] : options.env) setenv(k.c_str(), v.c_str(), 1);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int in = open(options.stdin_data != nullptr ? in_path.c_str() : "/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(126);
  }
  RunResult r;
  int status = 0;
  int sent = 0;
  for (;;) {
    const pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.sigint_after_ms >= 0 && sent < options.sigint_count &&
        t * 1000 >= options.sigint_after_ms + sent * 100) {
      kill(pid, SIGINT);
      ++sent;
    }
    if (t > options.limit_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  unlink(in_path.c_str());
  rmdir(dir.c_str());
  return r;
}

std::vector<int> processes_with(const std::string& marker) {
  std::vector<int> pids;
  DIR* d = opendir("/proc");
  if (d == nullptr) return pids;
  while (dirent* e = readdir(d)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    std::string cmd = slurp("/proc/" + std::string(e->d_name) + "/cmdline");
    for (char& c : cmd) {
      if (c == '\0') c = ' ';
    }
    // A zombie has an empty cmdline; it is gone for the test's purpose once reaped by init.
    if (cmd.find(marker) != std::string::npos) pids.push_back(pid);
  }
  closedir(d);
  return pids;
}

std::vector<std::string> entries_with_prefix(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  closedir(d);
  return out;
}

std::string unique_marker() {
  static int n = 0;
  std::ostringstream os;
  os << "dltune-test-marker-" << getpid() << "-" << n++ << "-"
     << std::chrono::steady_clock::now().time_since_epoch().count();
  return os.str();
}

}  // namespace dltune::testing
