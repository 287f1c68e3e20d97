// Pipeline schedules as data: every micro-batch's forward before its backward, the in-flight
// bounds each schedule promises, no deadlock, the bubble against GPipe's (S - 1) / (M + S - 1),
// and imbalanced pipelines (stages of different forward and backward times) worked out by hand.
#include "planning/schedule.h"

#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace dltune::planning {
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
        const PipelineSimulation sim =
            simulate(sched, std::vector<double>(S, 1.0), std::vector<double>(S, 2.0), M);
        ASSERT_GT(sim.step_time, 0) << "deadlock";
        // Balanced stages: every schedule's step is (M + S - 1)(f + b), every stage idles
        // (S - 1) / (M + S - 1) of it.
        EXPECT_NEAR(sim.step_time, (M + S - 1) * 3.0, 1e-9);
        for (double idle : sim.idle_fraction) EXPECT_NEAR(idle, double(S - 1) / (M + S - 1), 1e-9);
      }
}

// Two stages, the second three times slower, two micro-batches. By hand (stage: op [start, end]):
//   GPipe  s0: F0 [0,1] F1 [1,2]                 B0 [13,15] B1 [19,21]
//          s1:   F0 [1,4] F1 [4,7] B0 [7,13] B1 [13,19]
//   1F1B   s0: F0 [0,1] F1 [1,2]       B0 [10,12]            B1 [19,21]
//          s1:   F0 [1,4] B0 [4,10] F1 [10,13] B1 [13,19]
// Both end at 21, below the 27 of three slots of the slow stage; stage 0 works 6 of them.
TEST(Schedule, ASlowStageSetsThePaceOfAnImbalancedPipeline) {
  const std::vector<double> f = {1, 3}, b = {2, 6};
  for (auto sched : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB}) {
    SCOPED_TRACE(recipes::schedule_name(sched));
    const PipelineSimulation sim = simulate(sched, f, b, 2);
    EXPECT_NEAR(sim.step_time, 21.0, 1e-12);
    ASSERT_EQ(sim.idle_fraction.size(), 2u);
    EXPECT_NEAR(sim.idle_fraction[0], 1.0 - 6.0 / 21.0, 1e-12);
    EXPECT_NEAR(sim.idle_fraction[1], 1.0 - 18.0 / 21.0, 1e-12);
  }
}

// Stages whose forward and backward together take the same time, split differently: stage 0
// slow forward (f 2, b 1), stage 1 slow backward (f 1, b 2). GPipe waits for every forward before
// the slow backwards start; 1F1B interleaves them. By hand, two micro-batches:
//   GPipe  s0: F0 [0,2] F1 [2,4]                 B0 [7,8] B1 [9,10]    -> 10
//          s1:   F0 [2,3] F1 [4,5] B0 [5,7] B1 [7,9]
//   1F1B   s0: F0 [0,2] F1 [2,4]       B0 [5,6]       B1 [8,9]         -> 9
//          s1:   F0 [2,3] B0 [3,5] F1 [5,6] B1 [6,8]
// So GPipe exceeds the (M + S - 1)(f + b) = 9 of balanced stages; 1F1B meets it.
TEST(Schedule, GpipeLosesToOneFOneBWhenForwardAndBackwardAreImbalancedDifferently) {
  const std::vector<double> f = {2, 1}, b = {1, 2};
  EXPECT_NEAR(simulate(PipelineSchedule::kGpipe, f, b, 2).step_time, 10.0, 1e-12);
  EXPECT_NEAR(simulate(PipelineSchedule::kOneFOneB, f, b, 2).step_time, 9.0, 1e-12);
}

TEST(Schedule, AsyncFillsTheGapsOfAnImbalancedPipeline) {
  // A slow middle stage: with message-driven order, no stage waits longer than with 1F1B, and
  // every schedule needs at least the slow stage's work and at most (M + S - 1) of its slots.
  const std::vector<double> f = {1, 2, 1}, b = {2, 4, 2};
  const PipelineSimulation one = simulate(PipelineSchedule::kOneFOneB, f, b, 8);
  const PipelineSimulation async = simulate(PipelineSchedule::kAsync, f, b, 8);
  ASSERT_GT(async.step_time, 0) << "deadlock";
  EXPECT_LE(async.step_time, one.step_time + 1e-9);
  for (const PipelineSimulation& sim : {one, async}) {
    EXPECT_GE(sim.step_time, 8 * 6.0 - 1e-9);
    EXPECT_LE(sim.step_time, (8 + 3 - 1) * 6.0 + 1e-9);
    // The slow stage idles least.
    EXPECT_LT(sim.idle_fraction[1], sim.idle_fraction[0]);
    EXPECT_LT(sim.idle_fraction[1], sim.idle_fraction[2]);
  }
  // Slowing the middle stage slows the step: the simulation sees each stage's own times.
  const PipelineSimulation balanced =
      simulate(PipelineSchedule::kOneFOneB, {1, 1, 1}, {2, 2, 2}, 8);
  EXPECT_GT(one.step_time, balanced.step_time + 8.0);
}

}  // namespace
}  // namespace dltune::planning
