// Every algorithm x ranks {1,2,3,4,5,7,8} x counts {0,1,2,3,7,1023,2^20+3} against the serial
// reference on the thread communicator, in place and out of place, on buffers misaligned by
// 0, 4 (one element) and 1 byte. The 2^20+3 case runs in place and aligned only (both other
// variants are covered at the smaller counts), to keep the suite fast under sanitizers.
#include "comm/allreduce.h"

#include <algorithm>
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
                                         Algorithm::kHierarchical, Algorithm::kShm,
                                         Algorithm::kCma),
                       ::testing::Values(1, 2, 3, 4, 5, 7, 8)),
    name);

// Hierarchical with every node-local algorithm and a few leader algorithms, 3 nodes of 2 and
// 2 nodes of 4 ranks (one a non-power of two among leaders).
TEST(Hierarchical, InnerOuterCombinations) {
  for (Algorithm inner : {Algorithm::kShm, Algorithm::kCma, Algorithm::kTree, Algorithm::kRing,
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

// Rails: local rank k of every node, nodes in order, only where every node has as many ranks.
TEST(Hierarchical, RailsHoldLocalRankKOfEveryNode) {
  for (auto [ranks, per_node] :
       {std::pair{6, 2}, std::pair{8, 4}, std::pair{5, 2}, std::pair{4, 4}, std::pair{4, 1}}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks, " + std::to_string(per_node) + " per node");
    const bool uniform = ranks % per_node == 0 && per_node > 1 && ranks > per_node;
    Status s = spawn(
        ranks,
        [&](Communicator& c) -> Status {
          Communicator* rail = c.rail();
          if (!uniform) {
            return rail == nullptr ? ok_status() : internal_error("a rail where none can be");
          }
          if (rail == nullptr) return internal_error("no rail");
          const int local_rank = c.rank() % per_node, node = c.rank() / per_node;
          if (rail->size() != ranks / per_node || rail->rank() != node)
            return internal_error("rail rank " + std::to_string(rail->rank()) + " of " +
                                  std::to_string(rail->size()));
          // The rail's members are exactly local rank k of each node: their world ranks sum to
          // k * nodes + per_node * (0 + 1 + ... + nodes - 1).
          int64_t mine = c.rank(), sum = 0;
          AllreduceOptions o;
          o.algorithm = Algorithm::kRing;
          DLTUNE_TRY(allreduce(*rail, &mine, &sum, 1, DataType::kI64, ReduceOp::kSum, o));
          const int64_t nodes = ranks / per_node;
          const int64_t want = local_rank * nodes + per_node * nodes * (nodes - 1) / 2;
          return sum == want ? ok_status() : internal_error("rail sum " + std::to_string(sum));
        },
        per_node, std::chrono::seconds(30));
    EXPECT_TRUE(s.ok()) << s.error().message();
  }
}

// The multi-leader form on buffers in node-shared memory (the engine's gradient buffers), with
// counts that leave some local ranks an empty slice, and megabytes: the serial sum, the same
// bits on every rank.
TEST(Hierarchical, MultiLeaderOnSharedBuffers) {
  for (size_t count : {size_t{1}, size_t{17}, size_t{1027}, size_t{70001}, size_t{600001},
                       (size_t{1} << 20) + 5}) {
    SCOPED_TRACE(count);
    const int ranks = 8, per_node = 4;
    const auto want = testing::reference<float>(ranks, count, ReduceOp::kSum);
    Status s = spawn(
        ranks,
        [&](Communicator& c) -> Status {
          auto buf = c.alloc_shared(count * sizeof(float));
          if (!buf) return buf.error();
          float* p = buf->as<float>();
          const auto in = testing::make_input<float>(c.rank(), count);
          std::copy(in.begin(), in.end(), p);
          AllreduceOptions o;
          o.algorithm = Algorithm::kHierarchical;
          DLTUNE_TRY(allreduce(c, p, p, count, DataType::kF32, ReduceOp::kSum, o));
          for (size_t i = 0; i < count; ++i) {
            if (p[i] != want[i])
              return internal_error("element " + std::to_string(i) + ": " + std::to_string(p[i]) +
                                    " against " + std::to_string(want[i]));
          }
          return ok_status();
        },
        per_node, std::chrono::seconds(30));
    EXPECT_TRUE(s.ok()) << s.error().message();
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
