// EnvBlock: the environment of a rank being started, as a malloc'd NULL-terminated array
// (the shape execve() takes and PMIx_server_setup_fork reallocs).
#pragma once

#include <string>

namespace dltune::launcher {

// A malloc'd, NULL-terminated environment array, as PMIx_server_setup_fork requires (the
// library reallocs it). Owns the strings and the array.
class EnvBlock {
 public:
  EnvBlock() = default;
  explicit EnvBlock(char** environ_like);  // copies a NULL-terminated array
  ~EnvBlock();
  EnvBlock(const EnvBlock&) = delete;
  EnvBlock& operator=(const EnvBlock&) = delete;
  EnvBlock(EnvBlock&& o) noexcept;
  EnvBlock& operator=(EnvBlock&& o) noexcept;

  // Sets NAME=value, replacing an existing NAME; with `overwrite` false keeps an existing one.
  void set(const std::string& name, const std::string& value, bool overwrite = true);
  // The value of NAME, or nullptr.
  const char* find(const std::string& name) const;
  char*** raw() { return &env_; }  // for PMIx_server_setup_fork
  char** data() const { return env_; }

 private:
  char** env_ = nullptr;
};

}  // namespace dltune::launcher
