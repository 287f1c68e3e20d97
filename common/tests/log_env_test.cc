#include <gtest/gtest.h>
#include <stdlib.h>

#include "common/env.h"
#include "common/log.h"

namespace dltune {
namespace {

class LogEnv : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("DLTUNE_DEBUG");
    unsetenv("DLTUNE_DEBUG_SUBSYS");
    log_reconfigure();
  }
  void set(const char* level, const char* subsys) {
    setenv("DLTUNE_DEBUG", level, 1);
    if (subsys)
      setenv("DLTUNE_DEBUG_SUBSYS", subsys, 1);
    else
      unsetenv("DLTUNE_DEBUG_SUBSYS");
    log_reconfigure();
  }
};

TEST_F(LogEnv, DefaultIsWarn) {
  unsetenv("DLTUNE_DEBUG");
  log_reconfigure();
  EXPECT_TRUE(log_enabled(LogLevel::kWarn, "topo"));
  EXPECT_FALSE(log_enabled(LogLevel::kInfo, "topo"));
}

TEST_F(LogEnv, LevelFilters) {
  set("debug", nullptr);
  EXPECT_TRUE(log_enabled(LogLevel::kDebug, "comm"));
  EXPECT_FALSE(log_enabled(LogLevel::kTrace, "comm"));
  set("NONE", nullptr);
  EXPECT_FALSE(log_enabled(LogLevel::kError, "comm"));
}

TEST_F(LogEnv, SubsystemIncludeList) {
  set("INFO", "topo,db");
  EXPECT_TRUE(log_enabled(LogLevel::kInfo, "topo"));
  EXPECT_TRUE(log_enabled(LogLevel::kInfo, "DB"));
  EXPECT_FALSE(log_enabled(LogLevel::kInfo, "comm"));
  EXPECT_TRUE(log_enabled(LogLevel::kError, "comm"));  // errors are never filtered out
}

TEST_F(LogEnv, SubsystemExcludeList) {
  set("INFO", "^comm");
  EXPECT_FALSE(log_enabled(LogLevel::kInfo, "comm"));
  EXPECT_TRUE(log_enabled(LogLevel::kInfo, "topo"));
}

TEST_F(LogEnv, LineIsWrittenOnceWithLevelAndSubsystem) {
  set("INFO", nullptr);
  testing::internal::CaptureStderr();
  DLTUNE_LOG(kInfo, "topo") << "found " << 4 << " GPUs";
  DLTUNE_LOG(kDebug, "topo") << "hidden";
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "dltune INFO topo: found 4 GPUs\n");
}

TEST_F(LogEnv, FilteredStreamIsNotEvaluated) {
  set("WARN", nullptr);
  int calls = 0;
  auto count = [&] { return ++calls; };
  DLTUNE_LOG(kDebug, "x") << count();
  EXPECT_EQ(calls, 0);
}

TEST(Env, EveryVariableIsPrefixedAndDocumented) {
  ASSERT_FALSE(env::all().empty());
  for (const EnvVar& v : env::all()) {
    EXPECT_EQ(v.name.substr(0, 7), "DLTUNE_") << v.name;
    EXPECT_FALSE(v.doc.empty()) << v.name;
  }
}

TEST(Env, DefaultAndOverride) {
  unsetenv("DLTUNE_RUNS_DIR");
  EXPECT_EQ(env::get(env::kRunsDir), "runs");
  EXPECT_FALSE(env::get_if_set(env::kRunsDir).has_value());
  setenv("DLTUNE_RUNS_DIR", "/tmp/r", 1);
  EXPECT_EQ(env::get(env::kRunsDir), "/tmp/r");
  setenv("DLTUNE_RUNS_DIR", "", 1);  // empty counts as unset
  EXPECT_EQ(env::get(env::kRunsDir), "runs");
  unsetenv("DLTUNE_RUNS_DIR");
}

}  // namespace
}  // namespace dltune
