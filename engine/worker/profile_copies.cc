#include "engine/worker/profile_copies.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/json_input.h"
#include "common/paths.h"

namespace dltune::engine {
namespace {

// This process's arguments as it was started (/proc/self/cmdline).
std::vector<std::string> own_arguments() {
  std::vector<std::string> args;
  auto text = paths::read_file("/proc/self/cmdline");
  if (!text) return args;
  size_t start = 0;
  for (size_t i = 0; i < text->size(); ++i) {
    if ((*text)[i] != '\0') continue;
    args.push_back(text->substr(start, i - start));
    start = i + 1;
  }
  return args;
}

// `args` less the options a copy gets its own of (--copies, --out, --barrier), in both the
// "--opt VALUE" and "--opt=VALUE" spellings.
std::vector<std::string> without_own_options(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    bool dropped = false;
    for (const char* opt : {"--copies", "--out", "--barrier"}) {
      const std::string o = opt;
      if (args[i] == o) {
        ++i;  // and its value
        dropped = true;
        break;
      }
      if (args[i].rfind(o + "=", 0) == 0) {
        dropped = true;
        break;
      }
    }
    if (!dropped) out.push_back(args[i]);
  }
  return out;
}

// The CPUs copy `i` of `n` binds to: the i-th of n equal blocks of `cpus`; all of `cpus` when
// there are fewer than n.
std::vector<int> copy_cpus(const std::vector<int>& cpus, int i, int n) {
  const size_t per = cpus.size() / static_cast<size_t>(n);
  if (per == 0) return cpus;
  return {cpus.begin() + static_cast<long>(per * static_cast<size_t>(i)),
          cpus.begin() + static_cast<long>(per * static_cast<size_t>(i + 1))};
}

std::vector<int> allowed_cpus() {
  cpu_set_t mask;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  return cpus;
}

void kill_all(const std::vector<pid_t>& pids) {
  for (pid_t p : pids)
    if (p > 0) kill(p, SIGKILL);
  for (pid_t p : pids)
    if (p > 0) waitpid(p, nullptr, 0);
}

// A copy's exit status as a Status naming it.
Status copy_failed(int i, int n, int status) {
  const std::string who = "profile copy " + std::to_string(i + 1) + " of " + std::to_string(n);
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    const std::string why = who + " exited with code " + std::to_string(code);
    return code == 2 ? invalid_input(why) : peer_failed(why);
  }
  return peer_failed(who + " was killed by signal " + std::to_string(WTERMSIG(status)));
}

}  // namespace

Status wait_at_barrier(const std::string& fds) {
  int r = -1, w = -1;
  if (std::sscanf(fds.c_str(), "%d,%d", &r, &w) != 2 || r < 0 || w < 0)
    return invalid_input("--barrier: expected R,W (two file descriptors), got '" + fds + "'");
  const char ready = 'r';
  if (write(w, &ready, 1) != 1) return peer_failed("--barrier: the parent is gone");
  close(w);
  char go = 0;
  ssize_t got;
  while ((got = read(r, &go, 1)) < 0 && errno == EINTR) {
  }
  close(r);
  if (got != 1) return peer_failed("--barrier: the parent closed the barrier before releasing it");
  return ok_status();
}

Status profile_copies(int copies, const std::string& out) {
  const std::vector<std::string> base = without_own_options(own_arguments());
  if (base.empty()) return internal_error("cannot read this process's arguments");
  // The copies' answers, in $TMPDIR (else /tmp), removed on the way out.
  std::string tmpl = paths::temp_root() + "/dltune-profile-XXXXXX";
  const std::string asked = tmpl;  // mkdtemp may change the template even when it fails
  if (mkdtemp(tmpl.data()) == nullptr)
    return errno_error("cannot create a temporary directory from '" + asked + "'");
  const std::string dir = tmpl;
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_dir{dir};
  int ready[2], go[2];
  if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0)
    return internal_error("cannot create the profile copies' barrier");
  const std::vector<int> cpus = allowed_cpus();
  std::vector<pid_t> pids;
  for (int i = 0; i < copies; ++i) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--out", dir + "/copy" + std::to_string(i) + ".json", "--barrier",
                             std::to_string(go[0]) + "," + std::to_string(ready[1])});
    const std::vector<int> mine = copy_cpus(cpus, i, copies);
    const pid_t pid = fork();
    if (pid < 0) {
      kill_all(pids);
      return internal_error("fork failed for the profile copies");
    }
    if (pid == 0) {
      // The copy: its CPUs, the barrier's ends kept open across exec, this program again.
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : mine) CPU_SET(c, &set);
      if (!mine.empty()) sched_setaffinity(0, sizeof set, &set);
      fcntl(go[0], F_SETFD, 0);
      fcntl(ready[1], F_SETFD, 0);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv("/proc/self/exe", argv.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  close(go[0]);
  close(ready[1]);
  // Every copy ready (or one gone: then the others are stopped too).
  std::vector<bool> done(pids.size(), false);
  for (int arrived = 0; arrived < copies;) {
    pollfd p{ready[0], POLLIN, 0};
    if (poll(&p, 1, 200) > 0) {
      char c;
      const ssize_t n = read(ready[0], &c, 1);
      if (n == 1) {
        ++arrived;
        continue;
      }
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        pids[i] = -1;
        kill_all(pids);
        close(ready[0]);
        close(go[1]);
        return copy_failed(static_cast<int>(i), copies, status);
      }
    }
  }
  const std::string release(static_cast<size_t>(copies), 'g');
  const bool released =
      write(go[1], release.data(), release.size()) == static_cast<ssize_t>(release.size());
  close(go[1]);
  close(ready[0]);
  if (!released) {
    kill_all(pids);
    return internal_error("cannot release the profile copies");
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    waitpid(pids[i], &status, 0);
    pids[i] = -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      kill_all(pids);
      return copy_failed(static_cast<int>(i), copies, status);
    }
  }
  // The slowest copy's profile, with every copy's step time.
  nlohmann::json slowest;
  nlohmann::json steps = nlohmann::json::array();
  for (int i = 0; i < copies; ++i) {
    const std::string path = dir + "/copy" + std::to_string(i) + ".json";
    auto text = paths::read_file(path);
    if (!text) return text.error();
    auto j = parse_json_bounded(*text);
    if (!j || !j->is_object() || !(*j)["step_s"].is_number())
      return internal_error("profile copy " + std::to_string(i + 1) + " wrote no profile");
    steps.push_back((*j)["step_s"]);
    if (slowest.is_null() || (*j)["step_s"].get<double>() > slowest["step_s"].get<double>())
      slowest = std::move(*j);
  }
  slowest["copies"] = copies;
  slowest["copy_step_s"] = std::move(steps);
  const std::string text = slowest.dump() + "\n";
  if (out.empty()) {
    std::fputs(text.c_str(), stdout);
    return ok_status();
  }
  return paths::write_file_atomic(out, text);
}

}  // namespace dltune::engine
