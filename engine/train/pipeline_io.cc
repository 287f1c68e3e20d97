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
#include <string>

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
  const int64_t sz = heldout_->sample_numel(), lw = heldout_->label_width;
  const auto in_bytes = static_cast<size_t>(p.in_numel) * sizeof(float);
  const auto out_bytes = static_cast<size_t>(p.out_numel) * sizeof(float);
  double sums[2] = {0.0, 0.0};
  const int chunk = model_->max_batch();
  for (int64_t i = lo; i < hi; i += chunk) {
    const int b = static_cast<int>(std::min<int64_t>(chunk, hi - i));
    float* x = const_cast<float*>(p.first() ? input_.data() : p.in_buf.data());
    Status st;
    if (p.first())
      std::memcpy(x, heldout_->image(i), sizeof(float) * static_cast<size_t>(b * sz));
    else
      st = comm_->recv(p.prev, kEvalTag, x, b * in_bytes, comm_->deadline_from_now());
    const float* y = st ? model_->forward(x, b, false) : nullptr;
    if (st && !p.last())
      st = comm_->send(p.next, kEvalTag, y, b * out_bytes, comm_->deadline_from_now());
    if (!st)
      return std::move(st).error().wrap("evaluating on stage " + std::to_string(p.stage) +
                                        " at step " + std::to_string(step_));
    if (p.last()) {
      const int32_t* labels = heldout_->label(i);
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

Status Trainer::save_pipeline(const std::string& path) const {
  const PipelineStage& p = *pipe_;
  if (p.replica != 0) return ok_status();
  const auto slots = opt_->state();
  // Packed: parameters, each optimizer slot, model state (a stage's own layout).
  auto packed_floats = [&](int s) {
    const recipes::GraphInfo& info = p.infos[static_cast<size_t>(s)];
    return static_cast<size_t>(info.parameters) * (1 + slots.size()) +
           static_cast<size_t>(info.state_floats);
  };
  std::vector<float> mine(packed_floats(p.stage));
  const auto n = static_cast<size_t>(model_->num_params());
  float* w = mine.data();
  std::memcpy(w, model_->params(), n * sizeof(float));
  for (size_t k = 0; k < slots.size(); ++k)
    std::memcpy(w + n * (k + 1), slots[k]->data(), n * sizeof(float));
  std::memcpy(w + n * (1 + slots.size()), const_cast<Model&>(*model_).state(),
              static_cast<size_t>(model_->num_state()) * sizeof(float));
  if (rank() != 0) {
    Status st = comm_->send(0, kCheckpointTag, mine.data(), mine.size() * sizeof(float),
                            comm_->deadline_from_now());
    if (!st)
      return std::move(st).error().wrap("sending stage " + std::to_string(p.stage) +
                                        " to rank 0 for the checkpoint");
    return ok_status();
  }
  Checkpoint ck = checkpoint_header();
  ck.params.assign(static_cast<size_t>(p.full_info.parameters), 0.0f);
  ck.slots.assign(slots.size(), ck.params);
  ck.state.assign(static_cast<size_t>(p.full_info.state_floats), 0.0f);
  const auto params = by_name(p.full_info.params), state = by_name(p.full_info.state);
  auto place = [&](int s, const float* packed) {
    const recipes::GraphInfo& info = p.infos[static_cast<size_t>(s)];
    const auto ns = static_cast<size_t>(info.parameters);
    for (const auto& t : info.params) {
      if (!copy_owner(p.defs[static_cast<size_t>(s)], t.name).empty()) continue;
      const recipes::TensorInfo& whole = *params.at(t.name);
      const auto count = static_cast<size_t>(recipes::numel(t.shape));
      const auto at = static_cast<size_t>(t.offset), to = static_cast<size_t>(whole.offset);
      std::memcpy(ck.params.data() + to, packed + at, count * sizeof(float));
      for (size_t k = 0; k < slots.size(); ++k)
        std::memcpy(ck.slots[k].data() + to, packed + ns * (k + 1) + at, count * sizeof(float));
    }
    const float* st = packed + ns * (1 + slots.size());
    for (const auto& t : info.state)
      std::memcpy(ck.state.data() + state.at(t.name)->offset, st + t.offset,
                  static_cast<size_t>(recipes::numel(t.shape)) * sizeof(float));
  };
  place(0, mine.data());
  std::vector<float> theirs;
  for (int s = 1; s < p.stages; ++s) {
    theirs.resize(packed_floats(s));
    Status st = comm_->recv(s, kCheckpointTag, theirs.data(), theirs.size() * sizeof(float),
                            comm_->deadline_from_now());
    if (!st)
      return std::move(st).error().wrap("receiving stage " + std::to_string(s) +
                                        " for the checkpoint");
    place(s, theirs.data());
  }
  return save_checkpoint(path, ck);
}

Status Trainer::resume_pipeline(const std::string& path) {
  const PipelineStage& p = *pipe_;
  auto ck = load_checkpoint(path);
  if (!ck) return ck.error();
  DLTUNE_TRY(check_checkpoint(*ck, path, p.full_info.parameters, p.full_info.state_floats));
  const auto params = by_name(p.full_info.params), state = by_name(p.full_info.state);
  const auto slots = opt_->state();
  for (const auto& t : model_->info().params) {
    const std::string owner = copy_owner(p.def(), t.name);
    const recipes::TensorInfo& whole = *params.at(owner.empty() ? t.name : owner);
    const auto count = static_cast<size_t>(recipes::numel(t.shape)) * sizeof(float);
    std::memcpy(model_->params() + t.offset, ck->params.data() + whole.offset, count);
    for (size_t k = 0; k < slots.size(); ++k)
      std::memcpy(slots[k]->data() + t.offset, ck->slots[k].data() + whole.offset, count);
  }
  for (const auto& t : model_->info().state)
    std::memcpy(model_->state() + t.offset, ck->state.data() + state.at(t.name)->offset,
                static_cast<size_t>(recipes::numel(t.shape)) * sizeof(float));
  opt_->set_steps(ck->optimizer_steps);
  step_ = ck->step;
  return ok_status();
}

}  // namespace dltune::engine
