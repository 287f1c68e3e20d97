#include "common/paths.h"

#include <cerrno>
#include <cstdlib>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/env.h"

namespace dltune::paths {
namespace {

Result<std::string> xdg_dir(const char* var, const char* home_suffix) {
  const char* v = std::getenv(var);
  if (v != nullptr && v[0] == '/') return std::string(v);
  const char* home = std::getenv("HOME");
  if (home == nullptr || home[0] != '/') {
    return invalid_input(std::string("neither ") + var +
                         " nor HOME is set to an absolute path; set one of them");
  }
  return std::string(home) + home_suffix;
}

}  // namespace

Result<std::string> data_home() { return xdg_dir("XDG_DATA_HOME", "/.local/share"); }
Result<std::string> config_home() { return xdg_dir("XDG_CONFIG_HOME", "/.config"); }
Result<std::string> cache_home() { return xdg_dir("XDG_CACHE_HOME", "/.cache"); }

std::optional<std::string> runtime_dir() {
  const char* v = std::getenv("XDG_RUNTIME_DIR");
  if (v != nullptr && v[0] == '/') return std::string(v);
  return std::nullopt;
}

std::string temp_root() {
  const char* v = std::getenv("TMPDIR");  // the system's, not a DLTUNE_* setting
  return v != nullptr && *v != '\0' ? std::string(v) : std::string("/tmp");
}

Result<std::string> user_db() {
  if (auto v = env::get_if_set(env::kDb)) return *v;
  auto home = data_home();
  if (!home) return std::move(home).error().wrap("locating the user tuning database");
  return *home + "/dltune/dltune.db";
}

Status make_dirs(const std::string& dir) {
  if (dir.empty()) return ok_status();
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return ok_status();
    return invalid_input("'" + dir + "' exists and is not a directory");
  }
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) DLTUNE_TRY(make_dirs(dir.substr(0, slash)));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return errno_error("cannot create directory '" + dir + "'");
  }
  return ok_status();
}

Result<std::string> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_error("cannot read '" + path + "'");
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      Error e = errno_error("cannot read '" + path + "'");
      ::close(fd);
      return e;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status write_file_atomic(const std::string& path, const std::string& data) {
  return write_file_atomic(path, {std::string_view(data)});
}

Status write_file_atomic(const std::string& path, std::initializer_list<std::string_view> parts) {
  return write_file_atomic(path, std::vector<std::string_view>(parts));
}

Status write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("cannot create '" + tmp + "'");
  for (std::string_view data : parts) {
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        Error e = errno_error("cannot write '" + tmp + "'");
        ::close(fd);
        ::unlink(tmp.c_str());
        return e;
      }
      off += static_cast<size_t>(n);
    }
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Error e = errno_error("cannot flush '" + tmp + "'");
    ::unlink(tmp.c_str());
    return e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = errno_error("cannot rename '" + tmp + "' to '" + path + "'");
    ::unlink(tmp.c_str());
    return e;
  }
  return ok_status();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace dltune::paths
