#include "launcher/backend/temp_dir.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include <dirent.h>
#include <ftw.h>
#include <unistd.h>

#include "common/log.h"
#include "common/paths.h"
#include "common/strings.h"

namespace dltune::launcher {
namespace {

constexpr const char* kOwnerFile = "/.dltune-owner";

// "PID STARTTIME" of a process: its start time (clock ticks since boot, /proc/PID/stat field
// 22) tells a live owner from a later process that reused the pid. "" when it does not exist.
std::string process_identity(long pid) {
  auto stat = paths::read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return "";
  const auto close = stat->rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return "";
  const auto fields = strings::split(stat->substr(close + 2), ' ');
  if (fields.size() < 20) return "";
  return std::to_string(pid) + " " + fields[19];
}

}  // namespace

void sweep_stale_temp_dirs(const std::string& parent, const std::string& prefix) {
  DIR* d = ::opendir(parent.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string dir = parent + "/" + name;
    auto owner = paths::read_file(dir + kOwnerFile);
    if (!owner) continue;  // not ours, or still being created
    const auto pid = strings::parse_int(strings::split(strings::trim(*owner), ' ').front());
    if (!pid || *pid <= 0) continue;
    if (process_identity(*pid) != strings::trim(*owner)) stale.push_back(dir);
  }
  ::closedir(d);
  for (const auto& dir : stale) {
    if (remove_tree(dir).ok()) {
      DLTUNE_LOG(kInfo, "launch") << "removed stale " << dir;
    }
  }
}

Result<TempDir> TempDir::create(const std::string& parent, const std::string& prefix) {
  std::string templ = parent + "/" + prefix + "XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return errno_error("cannot create a temporary directory in '" + parent + "'");
  }
  TempDir dir{std::string(buf.data())};
  // Who owns it, so that a later launch can remove it if this process is SIGKILLed.
  (void)paths::write_file_atomic(dir.path() + kOwnerFile, process_identity(::getpid()) + "\n");
  return dir;
}

Result<TempDir> TempDir::create_in_tmp(const std::string& prefix) {
  return create(paths::temp_root(), prefix);
}

TempDir::TempDir(TempDir&& o) noexcept : path_(std::exchange(o.path_, std::string())) {}
TempDir& TempDir::operator=(TempDir&& o) noexcept {
  if (this != &o) {
    remove();
    path_ = std::exchange(o.path_, std::string());
  }
  return *this;
}
TempDir::~TempDir() { remove(); }

void TempDir::remove() {
  if (path_.empty()) return;
  if (auto st = remove_tree(path_); !st) {
    DLTUNE_LOG(kWarn, "launch") << st.error().message();
  }
  path_.clear();
}

Status remove_tree(const std::string& path) {
  auto rm = [](const char* p, const struct stat*, int, struct FTW*) -> int {
    return ::remove(p) == 0 || errno == ENOENT ? 0 : -1;
  };
  if (access(path.c_str(), F_OK) != 0) return ok_status();
  if (nftw(path.c_str(), rm, 16, FTW_DEPTH | FTW_PHYS) != 0) {
    return errno_error("cannot remove '" + path + "'");
  }
  return ok_status();
}

}  // namespace dltune::launcher
