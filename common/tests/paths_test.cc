#include "common/paths.h"

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/shm_name.h"

namespace dltune {
namespace {

TEST(Paths, XdgDataHomeAndFallback) {
  setenv("XDG_DATA_HOME", "/x/data", 1);
  EXPECT_EQ(*paths::data_home(), "/x/data");
  setenv("XDG_DATA_HOME", "relative/dir", 1);  // the spec says: ignore relative values
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(*paths::data_home(), "/home/u/.local/share");
  unsetenv("XDG_DATA_HOME");
  unsetenv("DLTUNE_DB");
  EXPECT_EQ(*paths::user_db(), "/home/u/.local/share/dltune/dltune.db");
  setenv("DLTUNE_DB", "/tmp/my.db", 1);
  EXPECT_EQ(*paths::user_db(), "/tmp/my.db");
  unsetenv("DLTUNE_DB");
  unsetenv("HOME");
  EXPECT_FALSE(paths::data_home().ok());
}

TEST(Paths, XdgRuntimeDirOnlyWhenAbsolute) {
  const char* old = getenv("XDG_RUNTIME_DIR");
  const std::string saved = old != nullptr ? old : "";
  setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
  EXPECT_EQ(paths::runtime_dir(), std::optional<std::string>("/run/user/7"));
  setenv("XDG_RUNTIME_DIR", "run/user/7", 1);  // relative: ignored, as the spec says
  EXPECT_EQ(paths::runtime_dir(), std::nullopt);
  unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(paths::runtime_dir(), std::nullopt);
  if (old != nullptr) setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
}

TEST(Paths, AtomicWriteReadBackAndMakeDirs) {
  char tmpl[] = "/tmp/dltune-paths-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/a/b/c";
  ASSERT_TRUE(paths::make_dirs(dir).ok());
  ASSERT_TRUE(paths::make_dirs(dir).ok());  // idempotent
  const std::string f = dir + "/plan.json";
  ASSERT_TRUE(paths::write_file_atomic(f, "one").ok());
  ASSERT_TRUE(paths::write_file_atomic(f, "two").ok());
  EXPECT_EQ(*paths::read_file(f), "two");
  auto missing = paths::read_file(dir + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("No such file"), std::string::npos);
  // A file where a directory is wanted is a clear error.
  EXPECT_FALSE(paths::make_dirs(f).ok());
  // Writing into a missing directory fails and leaves nothing behind.
  EXPECT_FALSE(paths::write_file_atomic(dir + "/missing/x", "y").ok());
  std::string cmd = std::string("rm -rf ") + tmpl;
  ASSERT_EQ(system(cmd.c_str()), 0);
}

// common/shm_name.h: the segments' one name format, and removing a dead process's segments only.
TEST(ShmName, RemovesOnlyThatProcesssSegments) {
  EXPECT_EQ(shm_segment_name(1234, 7), "/dltune-1234-7");
  const int dead = 2147483000;  // above any pid_max: no live process's
  for (const std::string& name :
       {shm_segment_name(dead, 0), shm_segment_name(dead, 15), shm_segment_name(dead + 1, 0),
        std::string("/dltune-") + std::to_string(dead) + "-x", shm_segment_name(dead / 10, 0)}) {
    std::ofstream("/dev/shm" + name) << "x";
  }
  EXPECT_EQ(remove_shm_segments_of(dead), 2);
  EXPECT_FALSE(paths::exists("/dev/shm" + shm_segment_name(dead, 0)));
  EXPECT_FALSE(paths::exists("/dev/shm" + shm_segment_name(dead, 15)));
  // Another pid's (a longer or a shorter one) and a name not of the format stay.
  for (const std::string& name : {shm_segment_name(dead + 1, 0), shm_segment_name(dead / 10, 0),
                                  std::string("/dltune-") + std::to_string(dead) + "-x"}) {
    EXPECT_TRUE(paths::exists("/dev/shm" + name)) << name;
    std::remove(("/dev/shm" + name).c_str());
  }
  EXPECT_EQ(remove_shm_segments_of(dead), 0);
}

}  // namespace
}  // namespace dltune
