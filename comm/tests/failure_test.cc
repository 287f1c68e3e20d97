// Bad input, mismatched counts and dead peers end in a clear error within the timeout.
#include <gtest/gtest.h>

#include "comm/allreduce.h"
#include "comm/thread_communicator.h"

namespace dltune::comm {
namespace {

using std::chrono::milliseconds;

bool contains(const Status& s, const std::string& text) {
  return !s.ok() && s.error().message().find(text) != std::string::npos;
}

// Collectives take their deadline from the coarse clock: on Clock's timeline, never late, and
// early by at most a kernel tick (allow 50 ms for a loaded machine); exact under a second.
TEST(Failure, CoarseDeadlineIsOnTheSameClockAndAtMostATickEarly) {
  for (milliseconds t : {milliseconds(0), milliseconds(200), milliseconds(300000)}) {
    const auto before = Clock::now();
    const Deadline d = coarse_deadline(t);
    const auto after = Clock::now();
    EXPECT_LE(d, after + t);
    EXPECT_GE(d, before + t - (t < std::chrono::seconds(1) ? milliseconds(0) : milliseconds(50)));
  }
}

TEST(Failure, MismatchedCountsFailNotHang) {
  for (Algorithm algo :
       {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kRabenseifner, Algorithm::kTree,
        Algorithm::kHierarchical, Algorithm::kShm, Algorithm::kCma}) {
    for (int ranks : {2, 3, 4}) {
      const auto start = Clock::now();
      Status s = spawn(
          ranks,
          [&](Communicator& c) -> Status {
            std::vector<float> v(4096, 1.0f);
            AllreduceOptions o;
            o.algorithm = algo;
            const size_t count = c.rank() == ranks - 1 ? 1000 : 2000;
            return allreduce(c, v.data(), v.data(), count, DataType::kF32, ReduceOp::kSum, o);
          },
          algo == Algorithm::kHierarchical ? 2 : 0, milliseconds(500));
      ASSERT_FALSE(s.ok()) << algorithm_name(algo) << " with " << ranks << " ranks";
      EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
      const std::string& m = s.error().message();
      EXPECT_TRUE(m.find("same count") != std::string::npos ||
                  m.find("in time") != std::string::npos)
          << m;
      EXPECT_NE(m.find(std::string(algorithm_name(algo))), std::string::npos) << m;
    }
  }
}

TEST(Failure, DeadPeerTimesOut) {
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kTree,
                         Algorithm::kShm, Algorithm::kCma}) {
    const auto start = Clock::now();
    Status s = spawn(
        3,
        [&](Communicator& c) -> Status {
          if (c.rank() == 1) return ok_status();  // "dies" before the collective
          std::vector<float> v(100, 1.0f);
          AllreduceOptions o;
          o.algorithm = algo;
          o.timeout = milliseconds(300);
          return allreduce(c, v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum, o);
        },
        0, milliseconds(300));
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().kind(), ErrorKind::kTimeout) << s.error().message();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  }
}

TEST(Failure, AsyncRequestCarriesTheError) {
  Status s = spawn(
      2,
      [&](Communicator& c) -> Status {
        if (c.rank() == 1) return ok_status();
        std::vector<float> v(10, 1.0f);
        Request r = allreduce_async(c, v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum,
                                    AllreduceOptions{});
        return r.wait();
      },
      0, milliseconds(200));
  EXPECT_EQ(s.ok() ? ErrorKind::kInternal : s.error().kind(), ErrorKind::kTimeout);
}

TEST(Failure, InvalidOptions) {
  Status s = spawn(
      4,
      [&](Communicator& c) -> Status {
        float v[4] = {};
        AllreduceOptions o;
        o.algorithm = Algorithm::kShm;  // 2 simulated nodes
        Status a = allreduce(c, v, v, 4, DataType::kF32, ReduceOp::kSum, o);
        if (!contains(a, "within one node")) return internal_error("shm across nodes accepted");
        o.algorithm = Algorithm::kCma;  // a rank on another node never takes part in CMA
        a = allreduce(c, v, v, 4, DataType::kF32, ReduceOp::kSum, o);
        if (!contains(a, "'cma' algorithm works within one node") || !contains(a, "use 'hier'"))
          return internal_error("cma across nodes accepted");
        o.algorithm = Algorithm::kNative;
        a = allreduce(c, v, v, 4, DataType::kF32, ReduceOp::kSum, o);
        if (a.ok() || a.error().kind() != ErrorKind::kUnsupported) {
          return internal_error("native on threads accepted");
        }
        o.algorithm = Algorithm::kHierarchical;
        o.outer = Algorithm::kShm;
        a = allreduce(c, v, v, 4, DataType::kF32, ReduceOp::kSum, o);
        if (!contains(a, "must be flat")) return internal_error("hier outer=shm accepted");
        o.outer = Algorithm::kCma;
        a = allreduce(c, v, v, 4, DataType::kF32, ReduceOp::kSum, o);
        if (!contains(a, "must be flat")) return internal_error("hier outer=cma accepted");
        o.outer = Algorithm::kRing;
        o.inner = Algorithm::kNative;
        a = allreduce(c, v, v, 4, DataType::kF32, ReduceOp::kSum, o);
        if (!contains(a, "node-local algorithm")) return internal_error("hier inner accepted");
        a = allreduce(c, nullptr, v, 4, DataType::kF32, ReduceOp::kSum, AllreduceOptions{});
        if (!contains(a, "null buffer")) return internal_error("null buffer accepted");
        BroadcastOptions b;
        b.root = 9;
        if (!contains(broadcast(c, v, 16, b), "not a rank")) return internal_error("root 9");
        return ok_status();
      },
      2);
  EXPECT_TRUE(s.ok()) << s.error().message();
}

}  // namespace
}  // namespace dltune::comm
