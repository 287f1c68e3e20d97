#include "comm/types.h"

#include <gtest/gtest.h>

namespace dltune::comm {
namespace {

TEST(Types, AlgorithmNamesRoundTrip) {
  for (Algorithm a : all_algorithms()) {
    auto parsed = parse_algorithm(algorithm_name(a));
    ASSERT_TRUE(parsed.ok()) << algorithm_name(a);
    EXPECT_EQ(*parsed, a);
  }
  EXPECT_EQ(algorithm_name(Algorithm::kRecursiveDoubling), "rd");
  EXPECT_EQ(algorithm_name(Algorithm::kHierarchical), "hier");
  EXPECT_EQ(algorithm_name(Algorithm::kCma), "cma");
}

TEST(Types, UnknownAlgorithmSuggests) {
  auto r = parse_algorithm("rign");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(r.error().message().find("did you mean 'ring'"), std::string::npos)
      << r.error().message();
}

TEST(Types, AlgorithmLists) {
  auto all = parse_algorithm_list("all");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 8u);
  auto two = parse_algorithm_list("ring, native");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<Algorithm>{Algorithm::kRing, Algorithm::kNative}));
  EXPECT_FALSE(parse_algorithm_list("ring,,rd").ok());
  EXPECT_FALSE(parse_algorithm_list("ring,ring").ok());
  EXPECT_FALSE(parse_algorithm_list("").ok());
  EXPECT_FALSE(parse_algorithm_list("ring,bogus").ok());
}

TEST(Types, Sizes) {
  EXPECT_EQ(dtype_size(DataType::kF32), 4u);
  EXPECT_EQ(dtype_size(DataType::kF64), 8u);
  EXPECT_EQ(dtype_size(DataType::kI32), 4u);
  EXPECT_EQ(dtype_size(DataType::kI64), 8u);
}

}  // namespace
}  // namespace dltune::comm
