// Every algorithm x ranks {1,2,3,4,5,7,8} x counts {0,1,2,3,7,1023,2^20+3} against the serial
// reference on the thread communicator, in place and out of place, on buffers misaligned by
// 0, 4 (one element) and 1 byte. The 2^20+3 case runs in place and aligned only (both other
// variants are covered at the smaller counts), to keep the suite fast under sanitizers.
#include "comm/allreduce.h"

#include <tuple>

#include <gtest/gtest.h>

#include "comm/tests/test_util.h"
#include "comm/thread_communicator.h"

namespace dltune::comm {
namespace {

using testing::Buffer;
using testing::make_input;
using testing::reference;

struct Case {
  AllreduceOptions options;
  int ranks;
  int ranks_per_node;  // hierarchical: simulated nodes
  size_t count;
  bool in_place;
  size_t misalign;
};

template <typename T>
void run_case(const Case& k, DataType type, ReduceOp op) {
  const auto want = reference<T>(k.ranks, k.count, op);
  std::vector<std::vector<T>> got(static_cast<size_t>(k.ranks));
  Status s = spawn(
      k.ranks,
      [&](Communicator& c) -> Status {
        Buffer<T> in(k.count, k.misalign), out(k.count, k.misalign);
        in.fill(make_input<T>(c.rank(), k.count));
        void* recv = k.in_place ? in.data() : out.data();
        DLTUNE_TRY(allreduce(c, in.data(), recv, k.count, type, op, k.options));
        if (!k.in_place && in.read(k.count) != make_input<T>(c.rank(), k.count)) {
          return internal_error("the send buffer was modified");
        }
        got[static_cast<size_t>(c.rank())] = (k.in_place ? in : out).read(k.count);
        return ok_status();
      },
      k.ranks_per_node, std::chrono::seconds(60));
  const std::string what =
      std::string(algorithm_name(k.options.algorithm)) + " ranks=" + std::to_string(k.ranks) +
      " count=" + std::to_string(k.count) + (k.in_place ? " in-place" : " out-of-place") +
      " misalign=" + std::to_string(k.misalign);
  ASSERT_TRUE(s.ok()) << what << ": " << s.error().message();
  for (int r = 0; r < k.ranks; ++r) {
    const auto& g = got[static_cast<size_t>(r)];
    ASSERT_EQ(g.size(), want.size());
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_EQ(g[i], want[i]) << what << " rank " << r << " element " << i;
    }
  }
}

class AllreduceTest : public ::testing::TestWithParam<std::tuple<Algorithm, int>> {
 protected:
  Case base() const {
    Case k{};
    k.options.algorithm = std::get<0>(GetParam());
    k.options.segment_bytes = 4096;  // several segments per chunk at the larger counts
    k.ranks = std::get<1>(GetParam());
    // Hierarchical runs over simulated nodes of 2 ranks (3 ranks: nodes of 2 and 1).
    k.ranks_per_node = k.options.algorithm == Algorithm::kHierarchical ? 2 : 0;
    return k;
  }
};

TEST_P(AllreduceTest, MatchesSerialReference) {
  for (size_t count : {0, 1, 2, 3, 7, 1023}) {
    for (bool in_place : {false, true}) {
      for (size_t misalign : {0, 4, 1}) {
        Case k = base();
        k.count = count, k.in_place = in_place, k.misalign = misalign;
        run_case<float>(k, DataType::kF32, ReduceOp::kSum);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST_P(AllreduceTest, LargeCount) {
  Case k = base();
  k.count = (size_t{1} << 20) + 3;
  k.in_place = true;
  run_case<float>(k, DataType::kF32, ReduceOp::kSum);
}

TEST_P(AllreduceTest, OtherTypesAndOps) {
  Case k = base();
  k.count = 1023;
  run_case<double>(k, DataType::kF64, ReduceOp::kSum);
  run_case<int32_t>(k, DataType::kI32, ReduceOp::kSum);
  run_case<int64_t>(k, DataType::kI64, ReduceOp::kMax);
  run_case<float>(k, DataType::kF32, ReduceOp::kMin);
}

std::string name(const ::testing::TestParamInfo<std::tuple<Algorithm, int>>& info) {
  return std::string(algorithm_name(std::get<0>(info.param))) + "_" +
         std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Thread, AllreduceTest,
    ::testing::Combine(::testing::Values(Algorithm::kRing, Algorithm::kRecursiveDoubling,
                                         Algorithm::kRabenseifner, Algorithm::kTree,
                                         Algorithm::kHierarchical, Algorithm::kShm),
                       ::testing::Values(1, 2, 3, 4, 5, 7, 8)),
    name);

// Hierarchical with every node-local algorithm and a few leader algorithms, 3 nodes of 2 and
// 2 nodes of 4 ranks (one a non-power of two among leaders).
TEST(Hierarchical, InnerOuterCombinations) {
  for (Algorithm inner : {Algorithm::kShm, Algorithm::kTree, Algorithm::kRing,
                          Algorithm::kRecursiveDoubling, Algorithm::kRabenseifner}) {
    for (Algorithm outer : {Algorithm::kRing, Algorithm::kRecursiveDoubling,
                            Algorithm::kRabenseifner, Algorithm::kTree}) {
      for (auto [ranks, per_node] : {std::pair{6, 2}, std::pair{8, 4}, std::pair{5, 2}}) {
        Case k{};
        k.options.algorithm = Algorithm::kHierarchical;
        k.options.inner = inner, k.options.outer = outer;
        k.ranks = ranks, k.ranks_per_node = per_node, k.count = 1027;
        SCOPED_TRACE(std::string(algorithm_name(inner)) + "/" + std::string(algorithm_name(outer)));
        run_case<float>(k, DataType::kF32, ReduceOp::kSum);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(Ring, SegmentSizes) {
  for (size_t seg : {size_t{0}, size_t{4}, size_t{12}, size_t{1} << 20}) {
    Case k{};
    k.options.algorithm = Algorithm::kRing;
    k.options.segment_bytes = seg;
    k.ranks = 3, k.count = 1000;
    run_case<float>(k, DataType::kF32, ReduceOp::kSum);
  }
}

}  // namespace
}  // namespace dltune::comm
