// Helpers shared by the topology tests: where the fixture XML files are, loading them, and
// scratch files for bad-input cases.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/paths.h"
#include "topology/topology.h"

namespace dltune::topology::testing {

// topology/tests/data of the source tree: $DLTUNE_SOURCE_DIR (set by ctest) or, when a test
// binary is run by hand, the folder of this header.
inline std::string data_dir() {
  if (const char* src = std::getenv("DLTUNE_SOURCE_DIR"); src != nullptr && *src != '\0') {
    return std::string(src) + "/topology/tests/data";
  }
  std::string here = __FILE__;
  return here.substr(0, here.rfind('/')) + "/data";
}

inline std::string data_path(const std::string& name) { return data_dir() + "/" + name; }

// Loads a fixture; fails the test (and returns an empty model) when it does not load.
inline Topology load_fixture(const std::string& name) {
  auto t = load_xml(data_path(name));
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message());
  return t.ok() ? *t : Topology{};
}

// A scratch file holding `text`, removed when the object goes away.
class TempFile {
 public:
  explicit TempFile(const std::string& text, const std::string& suffix = ".xml") {
    char tmpl[] = "/tmp/dltune-topo-test-XXXXXX";
    const int fd = mkstemp(tmpl);
    EXPECT_GE(fd, 0);
    close(fd);
    unlink(tmpl);
    path_ = std::string(tmpl) + suffix;
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TempFile() { unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string read_fixture(const std::string& name) {
  auto text = paths::read_file(data_path(name));
  EXPECT_TRUE(text.ok());
  return text.ok() ? *text : "";
}

}  // namespace dltune::topology::testing
