// The pipeline step of the step-time model: for balanced stages exactly what simulating the
// schedules gives (planning/schedule.h), plus the sends of every slot, the stage's allreduce,
// the update and an offloaded optimizer's round trip; each stage's cost summed over its nodes.
#include "planning/step_time.h"

#include <vector>

#include <gtest/gtest.h>

#include "planning/schedule.h"

namespace dltune::planning {
namespace {

using recipes::PipelineSchedule;

TEST(PipelineStepTime, BalancedStagesTakeWhatTheSchedulesTake) {
  for (int S : {1, 2, 4})
    for (int M : {1, 3, 8}) {
      SCOPED_TRACE("S" + std::to_string(S) + " M" + std::to_string(M));
      PipelineStepInput in;
      in.stage_s.assign(static_cast<size_t>(S), 0.3);  // forward 0.1 + backward 0.2
      in.microbatches = M;
      const PipelineStepTime t = pipeline_step_time(in);
      for (auto sched : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB}) {
        const PipelineSimulation sim =
            simulate(sched, std::vector<double>(static_cast<size_t>(S), 0.1),
                     std::vector<double>(static_cast<size_t>(S), 0.2), M);
        EXPECT_NEAR(t.step_s, sim.step_time, 1e-12) << recipes::schedule_name(sched);
      }
      EXPECT_NEAR(t.bubble, (S - 1.0) / (M + S - 1.0), 1e-12);
      EXPECT_NEAR(t.compute_s, t.step_s, 1e-12);
      EXPECT_EQ(t.comm_s, 0.0);
    }
}

TEST(PipelineStepTime, TheSlowestStagePacesEverySlotAndTheRestIsAdded) {
  PipelineStepInput in;
  in.stage_s = {0.1, 0.4, 0.2};
  in.microbatches = 5;  // 7 slots
  in.send_s = 0.01;
  in.allreduce_s = 0.5;
  in.update_s = 0.25;
  in.offload_s = 0.125;
  const PipelineStepTime t = pipeline_step_time(in);
  EXPECT_NEAR(t.step_s, 7 * (0.4 + 0.01) + 0.5 + 0.25 + 0.125, 1e-12);
  EXPECT_NEAR(t.compute_s, 7 * 0.4 + 0.25, 1e-12);
  EXPECT_NEAR(t.comm_s, 7 * 0.01 + 0.5 + 0.125, 1e-12);
  EXPECT_NEAR(t.compute_s + t.comm_s, t.step_s, 1e-12);
  EXPECT_NEAR(t.bubble, 2.0 / 7.0, 1e-12);
}

TEST(StageSums, EachStageSumsItsNodes) {
  const std::vector<double> cost = {1, 2, 4, 8, 16};
  EXPECT_EQ(stage_sums(cost, {0}), (std::vector<double>{31}));
  EXPECT_EQ(stage_sums(cost, {0, 2, 3}), (std::vector<double>{3, 4, 24}));
}

}  // namespace
}  // namespace dltune::planning
