// Pipeline schedules: the order in which one stage runs the forward (F) and backward (B) passes
// of a step's micro-batches.
//
//   GPipe (Huang et al. 2019): every forward, then every backward (last micro-batch first in
//     each stage's backward is not needed: backwards run in micro-batch order here, which gives
//     the same sums); a stage keeps all M micro-batches' activations.
//   1F1B (PipeDream-flush, Narayanan et al. 2021): stage s of S runs min(S - s - 1, M) warm-up
//     forwards, then alternates one forward and one backward, then the remaining backwards; at
//     most S - s micro-batches are in flight, with the same bubble as GPipe.
//   async (AxoNN, Singh and Bhatele 2022): no fixed order. A stage runs whichever pass has its
//     message: a backward as soon as its gradient arrives (preferred: it frees memory), else a
//     forward whose activation arrived, within a window of in-flight micro-batches. The
//     executor decides at run time; async_window() bounds it.
//
// Every schedule runs each micro-batch's forward before its backward and sums the same
// gradients; they differ in idle time and memory. The static orders are plain data, so they
// are tested (dependencies, in-flight bounds, deadlock freedom) without running a model. The
// pipeline executor (engine/train/pipeline.h) runs them; the memory model
// (planning/layout_memory.h) counts in_flight() micro-batches' activations per stage.
#pragma once

#include <string>
#include <vector>

#include "recipes/plan.h"

namespace dltune::planning {

struct PipeOp {
  bool forward = true;
  int microbatch = 0;
  bool operator==(const PipeOp&) const = default;
};

// The static order of stage `stage` of `stages` over `m` micro-batches (GPipe or 1F1B).
// Precondition: schedule is not kAsync, 0 <= stage < stages, m >= 1.
std::vector<PipeOp> static_schedule(recipes::PipelineSchedule schedule, int stages, int stage,
                                    int m);

// The most micro-batches whose activations stage `stage` keeps at once: M (GPipe),
// min(S - stage, M) (1F1B), async_window (async).
int in_flight(recipes::PipelineSchedule schedule, int stages, int stage, int m);
// The async schedule's window: the 1F1B bound S - stage (so it never holds more than 1F1B),
// at most M.
int async_window(int stages, int stage, int m);

// Simulates the schedule over `m` micro-batches on as many stages as `forward` has entries, stage
// s taking forward[s] for one micro-batch's forward and backward[s] for its backward, with free
// communication: the step's time and each stage's idle fraction. With balanced stages every
// schedule's step is (M + S - 1)(f + b), what the step-time model charges for the slowest stage
// (planning/step_time.h: pipeline_step_time()); with unbalanced stages the simulation says how
// far a schedule is from that (either way: GPipe with one stage slow forward and another slow
// backward takes longer). For tests of deadlock freedom (an order that deadlocks returns a
// negative time), of the bubble against (S - 1) / (M + S - 1), and of imbalanced pipelines.
// Precondition: forward.size() == backward.size() >= 1, m >= 1, every time > 0.
struct PipelineSimulation {
  double step_time = 0;
  std::vector<double> idle_fraction;
};
PipelineSimulation simulate(recipes::PipelineSchedule schedule, const std::vector<double>& forward,
                            const std::vector<double>& backward, int m);

}  // namespace dltune::planning
