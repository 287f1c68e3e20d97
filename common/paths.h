// XDG base directories and small file-system helpers.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dltune::paths {

// $XDG_DATA_HOME, else $HOME/.local/share (also when the variable is relative, as the XDG
// spec requires). Fails only when neither XDG_DATA_HOME nor HOME is usable.
Result<std::string> data_home();
// $XDG_CONFIG_HOME, else $HOME/.config.
Result<std::string> config_home();
// $XDG_CACHE_HOME, else $HOME/.cache.
Result<std::string> cache_home();
// $XDG_RUNTIME_DIR when it is set to an absolute path (the spec's per-user, per-boot
// directory), else nullopt: the spec leaves the fallback to the program.
std::optional<std::string> runtime_dir();
// Where temporary files go: $TMPDIR when set and not empty, else /tmp.
std::string temp_root();
// The user tuning database: $DLTUNE_DB, else <data_home>/dltune/dltune.db.
Result<std::string> user_db();

// Creates `dir` and its parents (mode 0755); success when it already exists as a directory.
Status make_dirs(const std::string& dir);
// Reads a whole file. Errors name the path: "cannot read 'x': No such file or directory".
Result<std::string> read_file(const std::string& path);
// Writes `data` to `path` atomically: a temporary file in the same directory, fsync, rename.
// On failure the old file (if any) is unchanged and no temporary file is left.
Status write_file_atomic(const std::string& path, const std::string& data);
// The same for a file made of `parts` in order (no joined copy of a large file in memory).
Status write_file_atomic(const std::string& path, std::initializer_list<std::string_view> parts);
Status write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts);
// True when `path` names an existing file or directory.
bool exists(const std::string& path);

}  // namespace dltune::paths
