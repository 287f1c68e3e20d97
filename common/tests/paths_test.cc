#include "common/paths.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

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

}  // namespace
}  // namespace dltune
