// Pipeline schedules as data: every micro-batch's forward before its backward, the in-flight
// bounds each schedule promises, no deadlock, and the bubble against GPipe's (S - 1) / (M + S - 1).
#include "engine/train/schedule.h"

#include <set>

#include <gtest/gtest.h>

namespace dltune::engine {
namespace {

using recipes::PipelineSchedule;

TEST(Schedule, StaticOrdersRunEachMicrobatchOnceForwardFirst) {
  for (auto sched : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB})
    for (int S : {1, 2, 3, 4})
      for (int M : {1, 2, 3, 8})
        for (int s = 0; s < S; ++s) {
          SCOPED_TRACE(std::string(recipes::schedule_name(sched)) + " S" + std::to_string(S) +
                       " M" + std::to_string(M) + " s" + std::to_string(s));
          const auto ops = static_schedule(sched, S, s, M);
          ASSERT_EQ(ops.size(), 2u * M);
          std::set<int> fwd, bwd;
          int live = 0, most = 0;
          for (const PipeOp& op : ops) {
            if (op.forward) {
              EXPECT_TRUE(fwd.insert(op.microbatch).second);
              most = std::max(most, ++live);
            } else {
              EXPECT_TRUE(fwd.count(op.microbatch)) << "backward before forward";
              EXPECT_TRUE(bwd.insert(op.microbatch).second);
              --live;
            }
          }
          EXPECT_EQ(most, in_flight(sched, S, s, M));
        }
}

TEST(Schedule, OneFOneBMatchesPipeDreamFlush) {
  // Stage 0 of 3 over 4 micro-batches: 2 warm-up forwards, then F B pairs, then 2 backwards.
  const std::vector<PipeOp> want = {{true, 0}, {true, 1},  {true, 2},  {false, 0},
                                    {true, 3}, {false, 1}, {false, 2}, {false, 3}};
  EXPECT_EQ(static_schedule(PipelineSchedule::kOneFOneB, 3, 0, 4), want);
  // The last stage alternates from the start.
  const std::vector<PipeOp> last = {{true, 0}, {false, 0}, {true, 1}, {false, 1}};
  EXPECT_EQ(static_schedule(PipelineSchedule::kOneFOneB, 3, 2, 2), last);
}

TEST(Schedule, NoDeadlockAndTheBubbleOfTheTheory) {
  for (auto sched :
       {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB, PipelineSchedule::kAsync})
    for (int S : {2, 3, 4})
      for (int M : {1, 4, 8, 16}) {
        SCOPED_TRACE(std::string(recipes::schedule_name(sched)) + " S" + std::to_string(S) + " M" +
                     std::to_string(M));
        const PipelineSimulation sim = simulate(sched, S, M, 1.0, 2.0);
        ASSERT_GT(sim.step_time, 0) << "deadlock";
        // Balanced stages: every schedule's step is (M + S - 1)(f + b), every stage idles
        // (S - 1) / (M + S - 1) of it.
        EXPECT_NEAR(sim.step_time, (M + S - 1) * 3.0, 1e-9);
        for (double idle : sim.idle_fraction) EXPECT_NEAR(idle, double(S - 1) / (M + S - 1), 1e-9);
      }
}

TEST(Schedule, AsyncFillsTheGapsOfAnImbalancedPipeline) {
  // A slow middle stage: with message-driven order, no stage waits longer than with 1F1B.
  const PipelineSimulation one = simulate(PipelineSchedule::kOneFOneB, 3, 8, 1.0, 2.0);
  const PipelineSimulation async = simulate(PipelineSchedule::kAsync, 3, 8, 1.0, 2.0);
  EXPECT_LE(async.step_time, one.step_time + 1e-9);
}

}  // namespace
}  // namespace dltune::engine
