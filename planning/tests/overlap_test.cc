// The overlap's two streams (planning/overlap.h) against timelines worked out by hand.
#include "planning/overlap.h"

#include <gtest/gtest.h>

namespace dltune::planning {
namespace {

TEST(Interference, InterpolatesOnLogBytesAndHoldsTheEnds) {
  Interference i;
  i.points = {{1024, 0.1, 0.4}, {1024 * 1024, 0.4, 1.0}};
  EXPECT_DOUBLE_EQ(i.at(10).compute, 0.1);
  EXPECT_DOUBLE_EQ(i.at(1 << 30).comm, 1.0);
  const auto mid = i.at(32 * 1024);  // halfway between 2^10 and 2^20 on log(bytes)
  EXPECT_NEAR(mid.compute, 0.25, 1e-12);
  EXPECT_NEAR(mid.comm, 0.7, 1e-12);
  // A measured point below zero (faster together: noise) is taken as none.
  i.points = {{1, -0.05, 0.2}};
  EXPECT_EQ(i.at(8).compute, 0.0);
  EXPECT_EQ(Interference{}.at(8).compute, 0.0);
  // The ends of its range, where it has one; itself where not.
  i.low = {{1, 0.0, 0.1}};
  i.high = {{1, 0.4, 0.3}};
  EXPECT_DOUBLE_EQ(i.end(true).at(8).compute, 0.4);
  EXPECT_DOUBLE_EQ(i.end(false).at(8).comm, 0.1);
  EXPECT_FALSE(i.end(true).has_range());
  i.high.clear();
  EXPECT_DOUBLE_EQ(i.end(true).at(8).comm, 0.2);
}

// Two segments of 1 s; one bucket of 0.5 s final after the first.
TEST(OverlapTimeline, PerfectOverlapHidesWhatFits) {
  const auto r = overlap_timeline(0.25, {1, 1}, {{0.5, 4096, 0}}, Interference{});
  EXPECT_DOUBLE_EQ(r.compute_end, 2.25);
  EXPECT_DOUBLE_EQ(r.comm_end, 1.75);
  EXPECT_DOUBLE_EQ(r.overlapped_s, 0.5);
}

// Time-sharing one core (both at half speed): exactly one after the other.
TEST(OverlapTimeline, TimeSharingOneCoreTakesTheSerialTime) {
  const Interference core = Interference::constant(1, 1, "one core");
  const auto r = overlap_timeline(0, {1, 1}, {{0.5, 4096, 0}, {0.75, 4096, 1}}, core);
  // Second segment: from 1 to 2 with the 0.5 s bucket at half speed both (1 s together), so
  // compute ends at 2.5; the second bucket runs alone from 2.5 to 3.25.
  EXPECT_DOUBLE_EQ(r.compute_end, 2.5);
  EXPECT_DOUBLE_EQ(r.comm_end, 3.25);
  EXPECT_DOUBLE_EQ(r.comm_end, 1 + 1 + 0.5 + 0.75);
  EXPECT_DOUBLE_EQ(r.overlapped_s, 1.0);
}

// Compute slowed by 25 % and communication by 100 % while both run.
TEST(OverlapTimeline, UnequalSlowdownsFollowTheEvents) {
  const Interference i = Interference::constant(0.25, 1, "test");
  const auto r = overlap_timeline(0, {1, 1}, {{0.25, 4096, 0}}, i);
  // From 1: the bucket at half speed ends at 1.5; compute did 0.5 / 1.25 = 0.4 by then, and its
  // last 0.6 alone: ends at 2.1.
  EXPECT_NEAR(r.compute_end, 2.1, 1e-12);
  EXPECT_NEAR(r.comm_end, 1.5, 1e-12);
  EXPECT_NEAR(r.overlapped_s, 0.5, 1e-12);
  // A bucket longer than the rest of compute: compute ends at 1 + 1.25 = 2.25 having let the
  // bucket do 1.25 / 2 = 0.625 of its 2 s; the rest alone: 3.625.
  const auto l = overlap_timeline(0, {1, 1}, {{2, 4096, 0}}, i);
  EXPECT_NEAR(l.compute_end, 2.25, 1e-12);
  EXPECT_NEAR(l.comm_end, 3.625, 1e-12);
}

// Buckets queue: one at a time, in order, each from when it is final; a bucket final only after
// compute (-1) waits for it.
TEST(OverlapTimeline, BucketsQueueAndWaitForTheirSegment) {
  const auto r =
      overlap_timeline(0, {1, 1, 1}, {{1.5, 64, 0}, {0.2, 64, 1}, {0.1, 64, -1}}, Interference{});
  // First bucket 1 .. 2.5, the second (final at 2) 2.5 .. 2.7, the last after compute (3): 3.1.
  EXPECT_DOUBLE_EQ(r.compute_end, 3);
  EXPECT_NEAR(r.comm_end, 3.1, 1e-12);
  EXPECT_NEAR(r.overlapped_s, 1.7, 1e-12);
  // No compute at all: the buckets run from the start.
  const auto none = overlap_timeline(2, {}, {{0.5, 64, -1}}, Interference{});
  EXPECT_DOUBLE_EQ(none.compute_end, 2);
  EXPECT_DOUBLE_EQ(none.comm_end, 2.5);
}

// dltune-worker overlap's inversion recovers the slowdowns the simulation ran with, whichever
// stream ends first.
TEST(SlowdownsFromTimings, InvertTheTimeline) {
  for (const auto& [c, m] : {std::pair{0.25, 1.0}, {1.0, 1.0}, {0.0, 0.5}, {2.0, 0.1}}) {
    for (const auto& [compute, comm] : {std::pair{1.0, 0.4}, {0.4, 1.0}, {1.0, 1.0}}) {
      SCOPED_TRACE(std::to_string(c) + "," + std::to_string(m) + " over " +
                   std::to_string(compute) + "," + std::to_string(comm));
      const Interference i = Interference::constant(c, m, "test");
      // Both from 0: one compute segment, one bucket final at once (-1 would wait for compute,
      // so a zero segment makes it final at the start).
      const auto r = overlap_timeline(0, {0, compute}, {{comm, 4096, 0}}, i);
      const auto p = slowdowns_from_timings(compute, comm, r.compute_end, r.comm_end);
      EXPECT_NEAR(p.compute, c, 1e-9);
      EXPECT_NEAR(p.comm, m, 1e-9);
    }
  }
}

}  // namespace
}  // namespace dltune::planning
