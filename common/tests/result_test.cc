#include "common/result.h"

#include <gtest/gtest.h>

namespace dltune {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_input("expected a positive number, got " + std::to_string(v));
  return v;
}

Result<int> doubled(int v) {
  auto r = parse_positive(v);
  if (!r) return std::move(r).error().wrap("reading 'batch'");
  return *r * 2;
}

Status chain(int v) {
  DLTUNE_TRY_CTX(doubled(v), "loading recipe 'x.yaml'");
  return ok_status();
}

TEST(Result, CarriesValue) {
  auto r = doubled(21);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(r.value_or(0), 42);
}

TEST(Result, WrapsContextOutermostFirst) {
  Status s = chain(-1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(),
            "loading recipe 'x.yaml': reading 'batch': expected a positive number, got -1");
  EXPECT_EQ(s.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(s.error().exit_code(), 2);
}

TEST(Result, ExitCodesFollowDesign) {
  EXPECT_EQ(invalid_input("x").exit_code(), 2);
  EXPECT_EQ(not_found("x").exit_code(), 2);
  EXPECT_EQ(unsupported("x").exit_code(), 2);
  EXPECT_EQ(io_error("x").exit_code(), 1);
  EXPECT_EQ(timeout_error("x").exit_code(), 1);
  EXPECT_EQ(peer_failed("x").exit_code(), 1);
  EXPECT_EQ(internal_error("x").exit_code(), 1);
}

TEST(Result, ValueOnErrorDies) {
  Result<int> r = invalid_input("bad");
  EXPECT_DEATH((void)r.value(), "value\\(\\) on an error Result: bad");
}

TEST(Result, CheckPrintsBothValues) {
  EXPECT_DEATH(DLTUNE_CHECK_EQ(1 + 1, 3), "1 \\+ 1 == 3 \\(2 vs 3\\)");
}

TEST(Result, ErrnoErrorNamesTheCause) {
  errno = ENOENT;
  Error e = errno_error("cannot open 'x'");
  EXPECT_EQ(e.message(), "cannot open 'x': No such file or directory");
}

}  // namespace
}  // namespace dltune
