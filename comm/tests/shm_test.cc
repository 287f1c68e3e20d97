// Node-shared buffers: every local rank sees every region; the shared-memory allreduce works
// in place on them (also at an offset inside the buffer), and detects mismatched counts.
#include <string>
#include <tuple>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "comm/algorithms.h"
#include "comm/allreduce.h"
#include "comm/shm_segment.h"
#include "comm/tests/test_util.h"
#include "comm/thread_communicator.h"

namespace dltune::comm {
namespace {

using testing::make_input;
using testing::reference;

TEST(Shm, PeersSeeEachOthersRegions) {
  Status s = spawn(3, [&](Communicator& c) -> Status {
    auto buf = c.alloc_shared(1000);
    DLTUNE_TRY(buf);
    auto* mine = buf->as<int>();
    for (int i = 0; i < 250; ++i) mine[i] = c.rank() * 1000 + i;
    std::vector<float> sync(1);
    DLTUNE_TRY(allreduce(c, sync.data(), sync.data(), 1, DataType::kF32, ReduceOp::kSum, {}));
    for (int r = 0; r < 3; ++r) {
      const auto* peer = static_cast<const int*>(buf->peer(r));
      if (peer[249] != r * 1000 + 249) return internal_error("peer region not visible");
    }
    return ok_status();
  });
  ASSERT_TRUE(s.ok()) << s.error().message();
}

// The barrier orders what ranks published before it, passes again and again (epochs), and a
// rank that never comes is a timeout that names it and says how many arrived.
TEST(Shm, SegmentBarrierPublishesAndTimesOut) {
  Status s = spawn(3, [&](Communicator& c) -> Status {
    auto seg = SharedSegment::create(c, 64, c.deadline_from_now());
    DLTUNE_TRY(seg);
    SharedSegment& g = **seg;
    for (uint64_t round = 1; round <= 1000; ++round) {
      g.publish(round * 10 + static_cast<uint64_t>(c.rank()));
      DLTUNE_TRY(g.barrier(c.deadline_from_now()));
      for (int k = 0; k < 3; ++k) {
        if (g.published(k) != round * 10 + static_cast<uint64_t>(k)) {
          return internal_error("round " + std::to_string(round) + ": rank " + std::to_string(k) +
                                " published " + std::to_string(g.published(k)));
        }
      }
      DLTUNE_TRY(g.barrier(c.deadline_from_now()));  // nobody publishes before all have read
    }
    if (c.rank() == 2) return ok_status();  // rank 2 skips the next barrier
    Status t = g.barrier(Clock::now() + std::chrono::milliseconds(100));
    if (t.ok() || t.error().kind() != ErrorKind::kTimeout ||
        t.error().message().find("local rank 2 did not reach the shared-memory barrier in time "
                                 "(2 of 3 arrived)") == std::string::npos) {
      return internal_error("expected a timeout naming rank 2 and 2 of 3 arrived, got: " +
                            (t.ok() ? std::string("ok") : t.error().message()));
    }
    return ok_status();
  });
  ASSERT_TRUE(s.ok()) << s.error().message();
}

// A rank 0 killed between creating its segment and unlinking it leaves the name behind; a later
// process with the same pid found it taken and failed ("shm_open(...): File exists", seen in
// the suite). The next names are tried; the stale ones are left alone.
TEST(Shm, ANameLeftBehindIsSkipped) {
  std::string first, second;
  std::vector<std::string> stale;
  Status s = spawn(1, [&](Communicator& c) -> Status {
    auto a = SharedSegment::create(c, 64, c.deadline_from_now());
    DLTUNE_TRY(a);
    first = (*a)->name();
    // The next two names of this process, taken as a killed process would leave them.
    const size_t dash = first.rfind('-');
    const uint64_t n = std::stoull(first.substr(dash + 1));
    for (uint64_t k = n + 1; k <= n + 2; ++k) {
      stale.push_back(first.substr(0, dash + 1) + std::to_string(k));
      const int fd = shm_open(stale.back().c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0) return internal_error("cannot create " + stale.back());
      close(fd);
    }
    auto b = SharedSegment::create(c, 64, c.deadline_from_now());
    DLTUNE_TRY(b);
    second = (*b)->name();
    return ok_status();
  });
  for (const std::string& name : stale) {
    const int fd = shm_open(name.c_str(), O_RDWR, 0600);
    EXPECT_GE(fd, 0) << name << " was removed";
    if (fd >= 0) close(fd);
    shm_unlink(name.c_str());
  }
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(stale.size(), 2u);
  EXPECT_EQ(second, first.substr(0, first.rfind('-') + 1) +
                        std::to_string(std::stoull(first.substr(first.rfind('-') + 1)) + 3));
}

TEST(Shm, InPlaceOnSharedBuffersAtOffsets) {
  for (int ranks : {1, 2, 3, 4, 7}) {
    // The counts around `at` straddle the small path's threshold for shared buffers.
    const size_t at = detail::kShmSmallSharedMaxBytes / sizeof(float);
    for (size_t count :
         {size_t{1}, size_t{17}, at - 1, at, at + 1, size_t{4099}, (size_t{1} << 20) + 3}) {
      const auto want = reference<float>(ranks, count, ReduceOp::kSum);
      Status s = spawn(ranks, [&](Communicator& c) -> Status {
        auto buf = c.alloc_shared((count + 5) * sizeof(float));
        DLTUNE_TRY(buf);
        float* data = buf->as<float>() + 5;  // an offset inside the shared buffer
        auto in = make_input<float>(c.rank(), count);
        std::copy(in.begin(), in.end(), data);
        AllreduceOptions o;
        o.algorithm = Algorithm::kShm;
        if (!c.find_shared(data, count * sizeof(float))) return internal_error("not found");
        for (int rep = 0; rep < 2; ++rep) {  // twice: the segment's barrier is reusable
          std::copy(in.begin(), in.end(), data);
          DLTUNE_TRY(allreduce(c, data, data, count, DataType::kF32, ReduceOp::kSum, o));
          if (!std::equal(want.begin(), want.end(), data)) return internal_error("wrong sum");
        }
        return ok_status();
      });
      ASSERT_TRUE(s.ok()) << ranks << " ranks, " << count << ": " << s.error().message();
    }
  }
}

// Both counts on the small path, both on the barrier path, and one on each: the first two
// name the mismatch; the last (the ranks wait in different places) ends in a timeout.
TEST(Shm, MismatchedCountsOnSharedBuffers) {
  const size_t at = detail::kShmSmallSharedMaxBytes / sizeof(float);
  for (auto [a, b, same_path] : {std::tuple{at / 4, at / 2, true}, std::tuple{at + 1, 2 * at, true},
                                 std::tuple{at, at + 1, false}}) {
    Status s = spawn(
        2,
        [&](Communicator& c) -> Status {
          auto buf = c.alloc_shared(4096);
          DLTUNE_TRY(buf);
          AllreduceOptions o;
          o.algorithm = Algorithm::kShm;
          return allreduce(c, buf->data(), buf->data(), c.rank() == 0 ? a : b, DataType::kF32,
                           ReduceOp::kSum, o);
        },
        0, std::chrono::milliseconds(same_path ? 2000 : 300));
    ASSERT_FALSE(s.ok()) << a << " vs " << b;
    const std::string& m = s.error().message();
    EXPECT_NE(m.find(same_path ? "same count" : "in time"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace dltune::comm
