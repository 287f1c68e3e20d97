#include "launcher/backend/env_block.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/check.h"

namespace dltune::launcher {
namespace {

size_t count(char** env) {
  size_t n = 0;
  while (env != nullptr && env[n] != nullptr) ++n;
  return n;
}

}  // namespace

EnvBlock::EnvBlock(char** environ_like) {
  const size_t n = count(environ_like);
  env_ = static_cast<char**>(std::calloc(n + 1, sizeof(char*)));
  DLTUNE_CHECK(env_ != nullptr, "out of memory");
  for (size_t i = 0; i < n; ++i) env_[i] = strdup(environ_like[i]);
}

EnvBlock::~EnvBlock() {
  for (size_t i = 0; env_ != nullptr && env_[i] != nullptr; ++i) std::free(env_[i]);
  std::free(env_);
}

EnvBlock::EnvBlock(EnvBlock&& o) noexcept : env_(std::exchange(o.env_, nullptr)) {}
EnvBlock& EnvBlock::operator=(EnvBlock&& o) noexcept {
  if (this != &o) std::swap(env_, o.env_);
  return *this;
}

const char* EnvBlock::find(const std::string& name) const {
  for (size_t i = 0; env_ != nullptr && env_[i] != nullptr; ++i) {
    if (std::strncmp(env_[i], name.c_str(), name.size()) == 0 && env_[i][name.size()] == '=') {
      return env_[i] + name.size() + 1;
    }
  }
  return nullptr;
}

void EnvBlock::set(const std::string& name, const std::string& value, bool overwrite) {
  const std::string entry = name + "=" + value;
  const size_t n = count(env_);
  for (size_t i = 0; i < n; ++i) {
    if (std::strncmp(env_[i], name.c_str(), name.size()) == 0 && env_[i][name.size()] == '=') {
      if (!overwrite) return;
      std::free(env_[i]);
      env_[i] = strdup(entry.c_str());
      return;
    }
  }
  char** grown = static_cast<char**>(std::realloc(env_, (n + 2) * sizeof(char*)));
  DLTUNE_CHECK(grown != nullptr, "out of memory");
  env_ = grown;
  env_[n] = strdup(entry.c_str());
  env_[n + 1] = nullptr;
}

}  // namespace dltune::launcher
