// Trainer: pipeline stages' evaluation and checkpoints.
//
// Evaluation shards the held-out set over the replicas; within a replica each chunk goes
// through the stages in turn (blocking send / receive, tag kEvalTag) and the last stage counts
// it. Checkpoints are the whole model's, in the format a data-parallel run writes: the stages
// of replica 0 send rank 0 their parameters, optimizer state and model state (one message each,
// packed), and rank 0 places every tensor at its offset in the whole model by name (a shared
// copy of a tied weight is dropped: its owner's tensor is the model's). Resuming, each rank
// reads the file and takes its stage's tensors by name, a shared copy from its owner. So a run
// may resume on another layout, or on one stage.
#include <cstring>
#include <map>
#include <span>
#include <string>

#include "engine/io/checkpoint_stream.h"
#include "engine/ops/loss.h"
#include "engine/train/pipeline.h"
#include "engine/train/trainer.h"

namespace dltune::engine {

namespace {

// The whole model's tensors by name.
std::map<std::string, const recipes::TensorInfo*> by_name(
    const std::vector<recipes::TensorInfo>& v) {
  std::map<std::string, const recipes::TensorInfo*> m;
  for (const auto& t : v) m[t.name] = &t;
  return m;
}

std::string copy_owner(const recipes::Stage& def, const std::string& name) {
  for (const auto& [copy, owner] : def.shared)
    if (copy == name) return owner;
  return {};
}

}  // namespace

Result<EvalMetrics> Trainer::evaluate_pipeline() {
  const PipelineStage& p = *pipe_;
  EvalMetrics em;
  em.step = step_;
  em.epoch = sampler_->epoch_of(step_);
  if (!heldout_ || heldout_->size == 0) return em;
  const int64_t n = heldout_->size;
  const int64_t lo = n * p.replica / p.replicas, hi = n * (p.replica + 1) / p.replicas;
  const int64_t lw = heldout_->label_width;
  const auto in_bytes = static_cast<size_t>(p.in_numel) * sizeof(float);
  const auto out_bytes = static_cast<size_t>(p.out_numel) * sizeof(float);
  double sums[2] = {0.0, 0.0};
  const int chunk = model_->max_batch();
  eval_labels_.resize(static_cast<size_t>(chunk * lw));
  for (int64_t i = lo; i < hi; i += chunk) {
    const int b = static_cast<int>(std::min<int64_t>(chunk, hi - i));
    float* x = const_cast<float*>(p.first() ? input_.data() : p.in_buf.data());
    Status st;
    if (p.first() || p.last())  // the first stage's inputs, the last one's labels
      DLTUNE_TRY(
          read_heldout(i, b, p.first() ? x : nullptr, p.last() ? eval_labels_.data() : nullptr));
    if (!p.first()) st = comm_->recv(p.prev, kEvalTag, x, b * in_bytes, comm_->deadline_from_now());
    const float* y = st ? model_->forward(x, b, false) : nullptr;
    if (st && !p.last())
      st = comm_->send(p.next, kEvalTag, y, b * out_bytes, comm_->deadline_from_now());
    if (!st)
      return std::move(st).error().wrap("evaluating on stage " + std::to_string(p.stage) +
                                        " at step " + std::to_string(step_));
    if (p.last()) {
      const int32_t* labels = eval_labels_.data();
      const auto rows = static_cast<int>(b * lw);
      sums[0] += count_correct(y, labels, rows, classes_);
      sums[1] += softmax_cross_entropy(y, labels, rows, classes_, 1.0f, nullptr);
    }
  }
  DLTUNE_TRY(allreduce_doubles(sums, 2));  // only the last stages add anything
  em.accuracy = sums[0] / static_cast<double>(n * lw);
  em.loss = sums[1] / static_cast<double>(n * lw);
  return em;
}

// A pipeline's checkpoint is the whole model's (it moves between layouts), written by rank 0
// without ever holding the whole model: the file's payload is the whole model's parameters,
// then each optimizer slot, then the state, each in node order, and the stages are contiguous
// node ranges, so every section is stage 0's tensors, then stage 1's, ... Rank 0 streams it
// (CheckpointStream) section by section and stage by stage: its own tensors from its buffers,
// each other stage's as runs of consecutive tensors that stage sends from its live buffers
// (a tied copy, whose owner is written, is skipped). Only replica 0 takes part.
Status Trainer::save_pipeline(const std::string& path) const {
  auto stream = stream_pipeline(path, /*hash_at_finish=*/false);
  if (!stream) return stream.error();
  return *stream ? (*stream)->finish() : ok_status();
}

Result<std::unique_ptr<CheckpointStream>> Trainer::stream_pipeline(const std::string& path,
                                                                   bool hash_at_finish) const {
  const PipelineStage& p = *pipe_;
  if (p.replica != 0) return std::unique_ptr<CheckpointStream>();
  const auto slots = opt_->state();
  const auto params = by_name(p.full_info.params), state = by_name(p.full_info.state);
  // Stage s's runs in section `k` (0: parameters, 1..K: slots, K+1: state): {local offset,
  // whole offset, floats}.
  struct Run {
    int64_t local = 0, whole = 0, count = 0;
  };
  auto runs = [&](int s, bool is_state) {
    const recipes::GraphInfo& info = p.infos[static_cast<size_t>(s)];
    std::vector<Run> out;
    for (const auto& t : is_state ? info.state : info.params) {
      if (!is_state && !copy_owner(p.defs[static_cast<size_t>(s)], t.name).empty()) continue;
      const recipes::TensorInfo& whole = is_state ? *state.at(t.name) : *params.at(t.name);
      const int64_t n = recipes::numel(t.shape);
      if (!out.empty() && out.back().local + out.back().count == t.offset &&
          out.back().whole + out.back().count == whole.offset)
        out.back().count += n;
      else
        out.push_back({t.offset, whole.offset, n});
    }
    return out;
  };
  const int sections = 2 + static_cast<int>(slots.size());
  auto local_base = [&](int k) -> const float* {  // this rank's buffer of section k
    if (k == 0) return model_->params();
    if (k <= static_cast<int>(slots.size())) return slots[static_cast<size_t>(k - 1)]->data();
    return model_->state();
  };
  const comm::Deadline deadline = comm_->deadline_from_now();
  if (rank() != 0) {
    for (int k = 0; k < sections; ++k)
      for (const Run& r : runs(p.stage, k == sections - 1)) {
        Status st = comm_->send(0, kCheckpointTag, local_base(k) + r.local,
                                static_cast<size_t>(r.count) * sizeof(float), deadline);
        if (!st)
          return std::move(st).error().wrap("sending stage " + std::to_string(p.stage) +
                                            " to rank 0 for the checkpoint");
      }
    return std::unique_ptr<CheckpointStream>();
  }
  const auto np = static_cast<size_t>(p.full_info.parameters);
  auto out =
      CheckpointStream::open(path, checkpoint_header(), np, std::vector<size_t>(slots.size(), np),
                             static_cast<size_t>(p.full_info.state_floats), hash_at_finish);
  if (!out) return out.error();
  CheckpointStream& file = **out;
  for (int k = 0; k < sections; ++k) {
    const size_t section_start = file.written();
    for (int s = 0; s < p.stages; ++s)
      for (const Run& r : runs(s, k == sections - 1)) {
        if (static_cast<size_t>(r.whole) != file.written() - section_start)
          return internal_error("checkpoint: stage " + std::to_string(s) +
                                "'s tensors are not in the whole model's order");
        const auto n = static_cast<size_t>(r.count);
        if (s == 0) {
          DLTUNE_TRY(file.write({local_base(k) + r.local, n}));
          continue;
        }
        if (p.ck_packed.size() < n) p.ck_packed.resize(n);  // sized at set-up; kept
        Status st = comm_->recv(s, kCheckpointTag, p.ck_packed.data(), n * sizeof(float), deadline);
        if (!st)
          return std::move(st).error().wrap("receiving stage " + std::to_string(s) +
                                            " for the checkpoint");
        DLTUNE_TRY(file.write({p.ck_packed.data(), n}));
      }
  }
  return std::move(*out);
}

Status Trainer::resume_pipeline(const std::string& path) {
  const PipelineStage& p = *pipe_;
  // Only this stage's tensors are kept: the file is streamed once past them (a model that
  // only fits as a pipeline must not be read whole into one rank).
  auto info = read_checkpoint_info(path);
  if (!info) return info.error();
  DLTUNE_TRY(check_checkpoint(*info, path, p.full_info.parameters, p.full_info.state_floats));
  const auto params = by_name(p.full_info.params), state = by_name(p.full_info.state);
  const auto slots = opt_->state();
  std::vector<CheckpointPiece> pieces;
  for (const auto& t : model_->info().params) {
    const std::string owner = copy_owner(p.def(), t.name);
    const recipes::TensorInfo& whole = *params.at(owner.empty() ? t.name : owner);
    const auto at = static_cast<size_t>(whole.offset);
    const auto count = static_cast<size_t>(recipes::numel(t.shape));
    pieces.push_back({0, at, count, model_->params() + t.offset});
    for (size_t k = 0; k < slots.size(); ++k)
      pieces.push_back({1 + k, at, count, slots[k]->data() + t.offset});
  }
  for (const auto& t : model_->info().state)
    pieces.push_back({1 + slots.size(), static_cast<size_t>(state.at(t.name)->offset),
                      static_cast<size_t>(recipes::numel(t.shape)), model_->state() + t.offset});
  DLTUNE_TRY(read_checkpoint_pieces(path, *info, std::move(pieces)));
  opt_->set_steps(info->meta.optimizer_steps);
  step_ = info->meta.step;
  return ok_status();
}

}  // namespace dltune::engine
