// Bootstrap without a PMIx server: the rank-0-of-1 fallback a program run by hand gets.
// (The PMIx path is exercised by tests/launcher, which starts real servers.)
#include "comm/bootstrap/bootstrap.h"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

namespace dltune::comm {
namespace {

class BootstrapSingletonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("PMIX_NAMESPACE");
    unsetenv("DLTUNE_PLAN");
  }
  void TearDown() override { unsetenv("DLTUNE_PLAN"); }
};

TEST_F(BootstrapSingletonTest, IsRankZeroOfOne) {
  auto b = Bootstrap::init();
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_TRUE(b->is_singleton());
  EXPECT_EQ(b->rank(), 0);
  EXPECT_EQ(b->size(), 1);
  EXPECT_EQ(b->local_rank(), 0);
  EXPECT_EQ(b->local_size(), 1);
  EXPECT_EQ(b->node_index(), 0);
  EXPECT_EQ(b->num_nodes(), 1);
  EXPECT_FALSE(b->hostname().empty());
  EXPECT_EQ(b->job_id(), "singleton");
}

TEST_F(BootstrapSingletonTest, PutIsVisibleOnlyAfterCommit) {
  auto b = Bootstrap::init();
  ASSERT_TRUE(b.ok());
  std::string binary("a\0b", 3);
  ASSERT_TRUE(b->put("addr", binary).ok());
  EXPECT_EQ(b->get(0, "addr").error().kind(), ErrorKind::kNotFound);
  ASSERT_TRUE(b->commit().ok());
  ASSERT_TRUE(b->fence(std::chrono::milliseconds(100)).ok());
  auto v = b->get(0, "addr");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, binary);
}

TEST_F(BootstrapSingletonTest, RejectsBadKeysAndRanks) {
  auto b = Bootstrap::init();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->put("", "x").error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(b->put(std::string(501, 'k'), "x").error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(b->get(1, "addr").error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(b->get(-1, "addr").error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(b->get(0, "missing").error().kind(), ErrorKind::kNotFound);
}

TEST_F(BootstrapSingletonTest, PlanComesFromDltunePlanFile) {
  auto b = Bootstrap::init();
  ASSERT_TRUE(b.ok());
  auto none = b->plan_blob();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");

  char path[] = "/tmp/dltune-plan-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string plan = R"({"algo":"ring"})";
  ASSERT_EQ(write(fd, plan.data(), plan.size()), static_cast<ssize_t>(plan.size()));
  close(fd);
  setenv("DLTUNE_PLAN", path, 1);
  auto got = b->plan_blob();
  unlink(path);
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(*got, plan);

  setenv("DLTUNE_PLAN", "/nonexistent/plan.json", 1);
  auto missing = b->plan_blob();
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("/nonexistent/plan.json"), std::string::npos);
}

TEST_F(BootstrapSingletonTest, MoveKeepsTheConnection) {
  auto b = Bootstrap::init();
  ASSERT_TRUE(b.ok());
  Bootstrap moved = std::move(*b);
  EXPECT_EQ(moved.size(), 1);
  EXPECT_TRUE(moved.finalize().ok());
  EXPECT_TRUE(moved.finalize().ok());
}

}  // namespace
}  // namespace dltune::comm
