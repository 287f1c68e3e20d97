// TempDir: a private directory for one launch, removed with everything in it on destruction.
#pragma once

#include <string>

#include "common/result.h"

namespace dltune::launcher {

class TempDir {
 public:
  // Creates "<parent>/<prefix>XXXXXX" (mode 0700) with an owner record (this process's pid and
  // start time) for sweep_stale_temp_dirs(). Failure: kIo naming the parent directory.
  static Result<TempDir> create(const std::string& parent, const std::string& prefix);
  // $TMPDIR (else /tmp) as the parent.
  static Result<TempDir> create_in_tmp(const std::string& prefix);

  TempDir(TempDir&& o) noexcept;
  TempDir& operator=(TempDir&& o) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();  // removes the tree; errors are logged, not raised

  const std::string& path() const { return path_; }
  // Removes the tree now (idempotent).
  void remove();

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Removes the directories "<parent>/<prefix>*" that TempDir::create() made for a process that
// no longer runs (a launcher killed with SIGKILL cannot clean up after itself). Directories
// without an owner record, or whose owner still runs, are left alone; errors are ignored.
void sweep_stale_temp_dirs(const std::string& parent, const std::string& prefix);

// Removes `path` and everything below it (no error when it does not exist).
Status remove_tree(const std::string& path);

}  // namespace dltune::launcher
