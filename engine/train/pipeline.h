// Internal to engine/train: the state of a rank that runs one pipeline stage (the Trainer's
// pipe_, config.stages > 1; trainer.h says how a step runs). Not a public API.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "engine/core/tensor.h"
#include "engine/graph/model.h"
#include "recipes/model/partition.h"
#include "recipes/plan.h"

namespace dltune::engine {

// A weight tied across stages (GPT's token embedding, read again by the head): the stage that
// owns it and the stage that keeps a copy sum their gradients over `comm` (the two ranks of
// one replica) after each step, so the copies stay equal.
struct PipelineTie {
  std::unique_ptr<comm::Communicator> comm;  // null on ranks of neither stage
  int64_t offset = 0, count = 0;             // the tensor in this rank's parameter buffer
  bool copy = false;                         // this rank holds the copy (not the owner)
};

struct PipelineStage {
  int stage = 0, stages = 1, replica = 0, replicas = 1;
  int prev = -1, next = -1;  // world ranks of the neighbouring stages; -1 at the ends
  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }

  recipes::Graph full;  // the whole model
  recipes::GraphInfo full_info;
  std::vector<recipes::Stage> defs;       // every stage (all ranks know the layout)
  std::vector<recipes::GraphInfo> infos;  // each stage's graph analysed (its tensor layout)
  const recipes::Stage& def() const { return defs[static_cast<size_t>(stage)]; }

  // This stage's replicas (colour = stage): its gradients are summed there. Null with one
  // replica.
  std::unique_ptr<comm::Communicator> replicas_comm;
  std::vector<PipelineTie> ties;

  recipes::PipelineSchedule schedule = recipes::PipelineSchedule::kOneFOneB;
  bool recompute = false;
  // Models sharing the Trainer's model's weights, one per micro-batch in flight beyond the
  // first (none with recomputation: one model recomputes each micro-batch's forward before its
  // backward).
  std::vector<std::unique_ptr<Model>> extra;
  int64_t in_numel = 0, out_numel = 0;  // per sample: the stage's input and output
  // Per step, at each micro-batch's offset in the replica's batch: the received inputs
  // (stages > 0), the received output gradients (all but the last), the input gradients sent
  // back (stages > 0). The last stage's loss gradients live in the Trainer's dlogits_.
  Buffer in_buf, dout_buf, din_buf;
  // Seconds this rank spent computing forward and backward passes (not waiting), and running
  // the schedule (from a step's start to its last backward), over every step so far: a
  // stage's bubble is 1 - busy_s / schedule_s (bench/parallel).
  double busy_s = 0, schedule_s = 0;
  // Rank 0's receive buffer for the checkpoint's runs from other stages (save_pipeline()),
  // allocated at set-up as large as the largest other stage's parameters, so writing a
  // checkpoint needs no memory beyond what the memory model counts.
  mutable std::vector<float> ck_packed;
};

// The tag of micro-batch m's activation (forward) and of its gradient (backward); evaluation
// chunks use kEvalTag. All below comm::kReservedTagBase.
inline int forward_tag(int m) { return 2 * m; }
inline int backward_tag(int m) { return 2 * m + 1; }
inline constexpr int kEvalTag = 1 << 19;  // above 2 x the most micro-batches (validate())
inline constexpr int kCheckpointTag = kEvalTag + 1;

}  // namespace dltune::engine
