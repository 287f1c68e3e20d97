// A fresh directory under /tmp for the engine's tests (checkpoints), removed with everything in
// it when the object goes. `path` is empty when the directory could not be made.
#pragma once

#include <cstdlib>
#include <string>

namespace dltune::engine::test_support {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/dltune-engine-test-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path = tmpl;
  }
  ~TempDir() {
    if (!path.empty()) (void)std::system(("rm -rf " + path).c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace dltune::engine::test_support
