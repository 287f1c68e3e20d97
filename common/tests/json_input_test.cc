// Bounded JSON parsing (json_input.h): depth and size are refused before nlohmann builds
// anything; what is within bounds parses exactly as nlohmann would.
#include "common/json_input.h"

#include <string>

#include <gtest/gtest.h>

namespace dltune {
namespace {

TEST(JsonInput, ParsesWhatIsWithinBounds) {
  auto j = parse_json_bounded(R"({"a": [1, {"b": "x]}[{"}], "c": "\"[[["})");
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_EQ((*j)["a"][1]["b"], "x]}[{");  // brackets inside strings do not count
  EXPECT_EQ((*j)["c"], "\"[[[");
  EXPECT_TRUE(check_json_bounds(std::string(64, '[') + std::string(64, ']')).ok());
}

// The reported crash: a bundle nested ~75,000 levels deep took `db import` down in a recursive
// dump(). Refused here in a linear scan, with where it went too deep.
TEST(JsonInput, RefusesDeepNestingBeforeParsing) {
  const std::string deep =
      "{\"content\": {\"j\": " + std::string(75000, '[') + std::string(75000, ']') + "}}";
  auto j = parse_json_bounded(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(j.error().message(), "nested deeper than 64 levels (at byte 80)");
  EXPECT_FALSE(parse_json_bounded(std::string(65, '{'), {.max_depth = 64}).ok());
  EXPECT_TRUE(check_json_bounds("[[[]]]", {.max_depth = 3}).ok());
  EXPECT_FALSE(check_json_bounds("[[[[]]]]", {.max_depth = 3}).ok());
}

TEST(JsonInput, RefusesSizeAndBadJsonWithOneSentence) {
  auto big = parse_json_bounded(std::string(2000, ' ') + "1", {.max_bytes = 1000});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().message(), "larger than 1000 bytes (2001)");
  for (const char* bad : {"", "{", "[1,]", "{\"a\": \"\xff\"}", "nul"}) {
    auto r = parse_json_bounded(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message().rfind("not valid JSON: ", 0), 0u) << r.error().message();
  }
}

}  // namespace
}  // namespace dltune
