// The small-message shared-memory allreduce (comm/algo_shm_small.cc), reached through kShm:
// ranks {1,2,3,4,5,7,8} x counts around a cache line and the threshold, every type and op,
// in place and out of place on misaligned buffers; bitwise-identical results; many
// back-to-back calls (the double-buffered slots and their sequence tags reused), mixed with
// large shm calls and other algorithms; non-blocking requests; the node-local phase of
// hierarchical; mismatched counts and a peer that never arrives.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/algorithms.h"
#include "comm/allreduce.h"
#include "comm/tests/test_util.h"
#include "comm/thread_communicator.h"

namespace dltune::comm {
namespace {

using std::chrono::milliseconds;
using testing::Buffer;
using testing::make_input;
using testing::reference;

constexpr size_t kMax = detail::kShmSmallMaxBytes;

AllreduceOptions shm_options() {
  AllreduceOptions o;
  o.algorithm = Algorithm::kShm;
  return o;
}

// Runs one kShm allreduce of `count` T on `ranks` threads and checks every rank's result
// against the serial reference (and that send is untouched out of place).
template <typename T>
void check(int ranks, size_t count, DataType type, ReduceOp op, bool in_place, size_t misalign) {
  const auto want = reference<T>(ranks, count, op);
  std::vector<std::vector<T>> got(static_cast<size_t>(ranks));
  Status s = spawn(ranks, [&](Communicator& c) -> Status {
    Buffer<T> in(count, misalign), out(count, misalign);
    in.fill(make_input<T>(c.rank(), count));
    void* recv = in_place ? in.data() : out.data();
    DLTUNE_TRY(allreduce(c, in.data(), recv, count, type, op, shm_options()));
    if (!in_place && in.read(count) != make_input<T>(c.rank(), count)) {
      return internal_error("the send buffer was modified");
    }
    got[static_cast<size_t>(c.rank())] = (in_place ? in : out).read(count);
    return ok_status();
  });
  const std::string what = std::string(dtype_name(type)) + " " + std::string(op_name(op)) +
                           " ranks=" + std::to_string(ranks) + " count=" + std::to_string(count) +
                           (in_place ? " in-place" : " out-of-place") +
                           " misalign=" + std::to_string(misalign);
  ASSERT_TRUE(s.ok()) << what << ": " << s.error().message();
  for (int r = 0; r < ranks; ++r) ASSERT_EQ(got[static_cast<size_t>(r)], want) << what;
}

TEST(ShmSmall, CountsAroundLinesAndThreshold) {
  const size_t at = kMax / sizeof(float);
  for (int ranks : {1, 2, 3, 4, 5, 7, 8}) {
    // 13/14/15 and 27/28/29 floats straddle the first and second cache lines (each an 8-byte
    // tag and 56 bytes of data); at-1/at/at+1 the threshold for private buffers (at+1 takes
    // the barrier path); 1023 is well past it.
    for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{14}, size_t{15}, size_t{27},
                         size_t{28}, size_t{29}, size_t{1023}, at - 1, at, at + 1}) {
      for (auto [in_place, misalign] : {std::pair{true, 0}, std::pair{false, 1}}) {
        check<float>(ranks, count, DataType::kF32, ReduceOp::kSum, in_place, misalign);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(ShmSmall, EveryTypeAndOp) {
  for (int ranks : {2, 3, 5}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      check<float>(ranks, 29, DataType::kF32, op, false, 4);
      check<double>(ranks, 7, DataType::kF64, op, true, 3);
      check<double>(ranks, kMax / 8, DataType::kF64, op, false, 0);
      check<int32_t>(ranks, 100, DataType::kI32, op, true, 1);
      check<int64_t>(ranks, 15, DataType::kI64, op, false, 0);
      if (HasFatalFailure()) return;
    }
  }
}

// Non-integer inputs: every rank must get the same bits (all ranks reduce in rank order).
TEST(ShmSmall, BitwiseIdenticalAcrossRanks) {
  const int ranks = 5;
  const size_t count = kMax / sizeof(float) - 3;  // many lines, a partial last one
  std::vector<std::vector<float>> got(ranks);
  Status s = spawn(ranks, [&](Communicator& c) -> Status {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = 1.0f / static_cast<float>(3 + i + 7 * c.rank());
    DLTUNE_TRY(
        allreduce(c, v.data(), v.data(), count, DataType::kF32, ReduceOp::kSum, shm_options()));
    got[static_cast<size_t>(c.rank())] = v;
    return ok_status();
  });
  ASSERT_TRUE(s.ok()) << s.error().message();
  for (int r = 1; r < ranks; ++r) {
    EXPECT_EQ(std::memcmp(got[0].data(), got[static_cast<size_t>(r)].data(), count * 4), 0) << r;
  }
}

// Thousands of calls back to back with values that change every call, sizes that change the
// number of lines, and other collectives in between: a stale slot or tag shows as a wrong sum.
TEST(ShmSmall, ManyBackToBackCalls) {
  for (int ranks : {2, 3, 4}) {
    Status s = spawn(
        ranks,
        [&](Communicator& c) -> Status {
          const AllreduceOptions shm = shm_options();
          AllreduceOptions rd;
          rd.algorithm = Algorithm::kRecursiveDoubling;
          std::vector<int64_t> v(kMax / 8);
          for (int it = 0; it < 3000; ++it) {
            const size_t count = 1 + static_cast<size_t>(it * 37) % v.size();
            for (size_t i = 0; i < count; ++i)
              v[i] = it * 1000 + c.rank() * 10 + static_cast<long>(i);
            const AllreduceOptions& o = it % 50 == 49 ? rd : shm;
            DLTUNE_TRY(allreduce(c, v.data(), v.data(), count, DataType::kI64, ReduceOp::kSum, o));
            for (size_t i = 0; i < count; ++i) {
              const int64_t want = ranks * (it * 1000 + static_cast<long>(i)) +
                                   10 * static_cast<int64_t>(ranks * (ranks - 1) / 2);
              if (v[i] != want) {
                return internal_error("call " + std::to_string(it) + " element " +
                                      std::to_string(i) + ": got " + std::to_string(v[i]) +
                                      ", want " + std::to_string(want));
              }
            }
            if (it % 500 == 250) {  // a large shm call (barrier path, may grow the staging segment)
              std::vector<float> big((size_t{1} << 16) + static_cast<size_t>(it), 1.0f);
              DLTUNE_TRY(allreduce(c, big.data(), big.data(), big.size(), DataType::kF32,
                                   ReduceOp::kSum, shm));
              if (big.back() != static_cast<float>(ranks)) return internal_error("large shm sum");
            }
          }
          return ok_status();
        },
        0, std::chrono::seconds(20));  // a slot overwritten too early shows as a hang
    ASSERT_TRUE(s.ok()) << ranks << " ranks: " << s.error().message();
  }
}

TEST(ShmSmall, AsyncRequestsInOrder) {
  const int ranks = 3;
  const size_t count = 100;
  const auto want = reference<float>(ranks, count, ReduceOp::kMax);
  Status s = spawn(ranks, [&](Communicator& c) -> Status {
    std::vector<std::vector<float>> bufs(20, make_input<float>(c.rank(), count));
    std::vector<Request> reqs;
    for (auto& b : bufs) {
      reqs.push_back(allreduce_async(c, b.data(), b.data(), count, DataType::kF32, ReduceOp::kMax,
                                     shm_options()));
    }
    for (auto& r : reqs) DLTUNE_TRY(r.wait());
    for (auto& b : bufs) {
      if (b != want) return internal_error("wrong async result");
    }
    return ok_status();
  });
  ASSERT_TRUE(s.ok()) << s.error().message();
}

// The node-local phase of hierarchical (inner = kShm) takes the small path too.
TEST(ShmSmall, HierarchicalNodeLocalPhase) {
  for (auto [ranks, per_node] : {std::pair{4, 2}, std::pair{7, 3}, std::pair{8, 4}}) {
    const size_t count = 250;
    const auto want = reference<int32_t>(ranks, count, ReduceOp::kSum);
    Status s = spawn(
        ranks,
        [&](Communicator& c) -> Status {
          auto v = make_input<int32_t>(c.rank(), count);
          AllreduceOptions o;
          o.algorithm = Algorithm::kHierarchical;
          o.inner = Algorithm::kShm;
          for (int rep = 0; rep < 20; ++rep) {
            auto w = v;
            DLTUNE_TRY(allreduce(c, w.data(), w.data(), count, DataType::kI32, ReduceOp::kSum, o));
            if (w != want) return internal_error("wrong hierarchical sum");
          }
          return ok_status();
        },
        per_node);
    ASSERT_TRUE(s.ok()) << ranks << " ranks: " << s.error().message();
  }
}

TEST(ShmSmall, MismatchedCounts) {
  Status s = spawn(
      3,
      [&](Communicator& c) -> Status {
        std::vector<float> v(64, 1.0f);
        return allreduce(c, v.data(), v.data(), c.rank() == 2 ? 10 : 20, DataType::kF32,
                         ReduceOp::kSum, shm_options());
      },
      0, milliseconds(2000));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("same count"), std::string::npos) << s.error().message();
}

// A rank that stops after some calls: the others fail with kTimeout at the deadline (the
// staging segment already exists, so the wait is the small path's own).
TEST(ShmSmall, PeerThatNeverArrivesTimesOut) {
  for (int ranks : {2, 4}) {
    const auto start = Clock::now();
    Status s = spawn(
        ranks,
        [&](Communicator& c) -> Status {
          float v[8] = {};
          AllreduceOptions o = shm_options();
          o.timeout = milliseconds(300);
          for (int it = 0; it < 5; ++it) {
            DLTUNE_TRY(allreduce(c, v, v, 8, DataType::kF32, ReduceOp::kSum, o));
          }
          if (c.rank() == 1) return ok_status();  // "dies" before the sixth call
          return allreduce(c, v, v, 8, DataType::kF32, ReduceOp::kSum, o);
        },
        0, milliseconds(300));
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().kind(), ErrorKind::kTimeout) << s.error().message();
    EXPECT_NE(s.error().message().find("local rank 1 did not reach the small-message"),
              std::string::npos)
        << s.error().message();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  }
}

}  // namespace
}  // namespace dltune::comm
