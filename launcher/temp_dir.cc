#include "launcher/temp_dir.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include <ftw.h>
#include <unistd.h>

#include "common/log.h"

namespace dltune::launcher {

Result<TempDir> TempDir::create(const std::string& parent, const std::string& prefix) {
  std::string templ = parent + "/" + prefix + "XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return errno_error("cannot create a temporary directory in '" + parent + "'");
  }
  return TempDir(std::string(buf.data()));
}

Result<TempDir> TempDir::create_in_tmp(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  return create(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", prefix);
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
