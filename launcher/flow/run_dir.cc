#include "launcher/flow/run_dir.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <ctime>

#include <sys/stat.h>

#include "common/paths.h"
#include "launcher/backend/temp_dir.h"

namespace dltune::launcher {
namespace {

Result<std::string> absolute(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return errno_error("resolving " + path);
  return std::string(buf);
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

Result<RunDir> create_run_dir(const std::string& runs_dir, const std::string& name) {
  DLTUNE_TRY_CTX(paths::make_dirs(runs_dir), "creating the runs directory");
  auto base = absolute(runs_dir);
  if (!base) return base.error();
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  const std::string stem = *base + "/" + name + "-" + stamp;
  for (int i = 1; i < 1000; ++i) {
    const std::string dir = i == 1 ? stem : stem + "-" + std::to_string(i);
    if (::mkdir(dir.c_str(), 0755) == 0) {
      RunDir rd{dir};
      DLTUNE_TRY(paths::make_dirs(dir + "/checkpoints"));
      return rd;
    }
    if (errno != EEXIST) return errno_error("creating the run directory " + dir);
  }
  return io_error("too many runs named " + stem + "-N in this second");
}

RunDirGuard::~RunDirGuard() {
  if (!path_.empty()) (void)remove_tree(path_);  // best effort: the launch's error is what counts
}

Result<RunDir> open_run_dir(const std::string& path) {
  if (!is_dir(path)) {
    return invalid_input("--resume " + path + ": not a run directory (no such directory)");
  }
  auto abs = absolute(path);
  if (!abs) return abs.error();
  RunDir rd{*abs};
  if (paths::exists(rd.file("train_config.json"))) {
    return invalid_input("--resume " + path +
                         ": this run directory was written by an older dltune, whose ranks read "
                         "train_config.json; resume it with that version, or start the recipe "
                         "again with `dltune launch " +
                         rd.recipe() + "`");
  }
  for (const std::string& f : {rd.recipe(), rd.plan()}) {
    if (!paths::exists(f)) {
      return invalid_input("--resume " + path + ": not a dltune run directory (" + f +
                           " is missing)");
    }
  }
  DLTUNE_TRY(paths::make_dirs(rd.path + "/checkpoints"));
  return rd;
}

}  // namespace dltune::launcher
