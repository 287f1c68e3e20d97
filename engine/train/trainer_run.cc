// Trainer: the training loop, evaluation, checkpoints.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "comm/allreduce.h"
#include "common/log.h"
#include "engine/ops/loss.h"
#include "engine/train/trainer.h"

namespace dltune::engine {

Result<EvalMetrics> Trainer::evaluate() {
  if (pipe_) return evaluate_pipeline();
  EvalMetrics em;
  em.step = step_;
  em.epoch = sampler_->epoch_of(step_);
  if (!heldout_ || heldout_->size == 0) return em;
  // Shard the held-out set over the ranks, then sum (correct, loss) across them. Accuracy and
  // loss are per prediction: per sample, or per position of a text sample.
  const int64_t n = heldout_->size;
  const int64_t lo = n * rank() / ranks(), hi = n * (rank() + 1) / ranks();
  const int64_t sz = heldout_->sample_numel(), lw = heldout_->label_width;
  double sums[2] = {0.0, 0.0};
  const int chunk = model_->max_batch();
  eval_labels_.resize(heldout_->streamed() ? static_cast<size_t>(chunk * lw) : 0);
  for (int64_t i = lo; i < hi; i += chunk) {
    const int b = static_cast<int>(std::min<int64_t>(chunk, hi - i));
    const float* logits = nullptr;
    const float* x = heldout_->streamed() ? input_.data() : heldout_->image(i);
    const int32_t* y = heldout_->streamed() ? eval_labels_.data() : heldout_->label(i);
    if (heldout_->streamed()) DLTUNE_TRY(read_heldout(i, b, input_.data(), eval_labels_.data()));
    if (gpu_) {
      auto l = eval_logits_gpu(x, b);
      if (!l) return l.error().wrap("evaluating at step " + std::to_string(step_));
      logits = *l;
    } else {
      if (x != input_.data()) std::memcpy(input_.data(), x, sizeof(float) * b * sz);
      logits = model_->forward(input_.data(), b, false);
    }
    const auto rows = static_cast<int>(b * lw);
    sums[0] += count_correct(logits, y, rows, classes_);
    sums[1] += softmax_cross_entropy(logits, y, rows, classes_, 1.0f, nullptr);
  }
  DLTUNE_TRY(allreduce_doubles(sums, 2));
  em.accuracy = sums[0] / static_cast<double>(n * lw);
  em.loss = sums[1] / static_cast<double>(n * lw);
  return em;
}

Status Trainer::read_heldout(int64_t first, int b, float* x, int32_t* y) {
  if (heldout_->streamed() && loader_) return loader_->read(*heldout_, first, b, x, y);
  return read_samples(*heldout_, first, b, x, y);
}

Checkpoint Trainer::checkpoint_header() const {
  Checkpoint ck;
  ck.model = config_.model;
  ck.step = step_;
  ck.seed = config_.seed;
  ck.global_batch = global_batch_;
  ck.epoch = sampler_->epoch_of(step_);
  ck.rng_state = Rng::mix(config_.seed, static_cast<uint64_t>(step_));
  ck.optimizer = opt_->kind();
  ck.optimizer_steps = opt_->steps();
  return ck;
}

Status Trainer::save(const std::string& path) const {
  if (pipe_) return save_pipeline(path);
  if (rank() != 0) return ok_status();
  if (gpu_) DLTUNE_TRY(sync_host_params());
  Checkpoint ck = checkpoint_header();
  const auto n = static_cast<size_t>(model_->num_params());
  std::vector<std::span<const float>> slots;
  for (Buffer* b : opt_->state()) slots.emplace_back(b->data(), n);
  return save_checkpoint(path, ck, {model_->params(), n}, slots,
                         {model_->state(), static_cast<size_t>(model_->num_state())});
}

Status Trainer::checkpoint(const std::string& path) {
  // The step's loss was finite, but its update may not have been: checkpointing non-finite
  // parameters would replace the last good checkpoint. Data-parallel CPU ranks hold the same
  // parameters, so every rank stops here alike (a pipeline's stages, or GPU ranks whose host
  // copy only rank 0 refreshes, could not agree without a collective: not checked).
  if (!pipe_ && !gpu_) {
    const float* p = model_->params();
    if (!std::all_of(p, p + model_->num_params(), [](float v) { return std::isfinite(v); })) {
      diverged_ = true;
      return diverged_error("the parameters are not finite");
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  Status st = ok_status();
  if (pipe_) {
    // The stages stream their tensors to rank 0, into the file; rank 0 first waits for the
    // previous write (its temporary file is this one's), and a thread finishes this one.
    if (rank() == 0) st = ckpt_writer_.wait();
    if (st.ok()) {
      auto stream = stream_pipeline(path, /*hash_at_finish=*/true);
      if (!stream) {
        st = stream.error();
      } else if (*stream) {
        st = ckpt_writer_.finish_in_background(std::move(*stream));
      }
    }
  } else if (rank() != 0) {
    st = save(path);  // nothing to write: data-parallel rank 0 holds the same state
  } else {
    if (gpu_) st = sync_host_params();
    if (st.ok()) {
      const auto n = static_cast<size_t>(model_->num_params());
      std::vector<std::span<const float>> slots;
      for (Buffer* b : opt_->state()) slots.emplace_back(b->data(), n);
      st = ckpt_writer_.start(path, checkpoint_header(), {model_->params(), n}, slots,
                              {model_->state(), static_cast<size_t>(model_->num_state())});
    }
  }
  ckpt_blocked_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ckpt_step_ = step_;
  ++ckpt_count_;
  return st;
}

Result<bool> Trainer::checkpoint_due_by_time() {
  if (!(config_.checkpoint_every_s > 0) || config_.checkpoint_path.empty()) return false;
  const double since =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - ckpt_at_).count();
  int32_t due = rank() == 0 && since >= config_.checkpoint_every_s ? 1 : 0;
  if (ranks() > 1) DLTUNE_TRY(allreduce_small(&due, 1, comm::DataType::kI32, comm::ReduceOp::kMax));
  return due != 0;
}

Status Trainer::check_checkpoint(const CheckpointInfo& info, const std::string& path,
                                 int64_t params, int64_t state) const {
  const std::string where = "checkpoint '" + path + "'";
  const Checkpoint& ck = info.meta;
  if (ck.model != config_.model)
    return invalid_input(where + " is of model '" + ck.model + "', not '" + config_.model + "'");
  if (static_cast<int64_t>(info.params) != params || static_cast<int64_t>(info.state) != state)
    return invalid_input(where + " holds " + std::to_string(info.params) + " parameters and " +
                         std::to_string(info.state) + " state values, the model has " +
                         std::to_string(params) + " and " + std::to_string(state));
  if (ck.optimizer != opt_->kind() || info.slots.size() != opt_->state().size())
    return invalid_input(where + " was written by optimizer " + ck.optimizer + ", this run uses " +
                         opt_->kind());
  for (size_t n : info.slots)
    if (n != info.params) return invalid_input(where + " has optimizer state of the wrong size");
  if (ck.seed != config_.seed || ck.global_batch != global_batch_)
    return invalid_input(where + " was written with seed " + std::to_string(ck.seed) +
                         " and global batch " + std::to_string(ck.global_batch) +
                         "; resume with the same values to continue the same data order");
  return ok_status();
}

Status Trainer::resume(const std::string& path) {
  if (pipe_) return resume_pipeline(path);
  auto info = read_checkpoint_info(path);
  if (!info) return info.error();
  DLTUNE_TRY(check_checkpoint(*info, path, model_->num_params(), model_->num_state()));
  // Straight into the model's and optimizer's buffers (no copy of the file in memory).
  const auto slots = opt_->state();
  std::vector<CheckpointPiece> pieces = {{0, 0, info->params, model_->params()}};
  for (size_t i = 0; i < slots.size(); ++i)
    pieces.push_back({1 + i, 0, info->slots[i], slots[i]->data()});
  pieces.push_back({1 + slots.size(), 0, info->state, model_->state()});
  DLTUNE_TRY(read_checkpoint_pieces(path, *info, std::move(pieces)));
  opt_->set_steps(info->meta.optimizer_steps);
  if (gpu_) DLTUNE_TRY(upload_state_gpu());
  step_ = info->meta.step;
  return ok_status();
}

Error Trainer::diverged_error(const std::string& what) const {
  const double peak = config_.lr;
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "training diverged: %s at step %lld (learning rate %.4g in that step, "
                "peak %.4g, global batch %lld): lower optimizer.lr or the batch, lengthen the "
                "warmup, or scale lr less with the global batch (optimizer.lr_scaling: sqrt or "
                "none)",
                what.c_str(), static_cast<long long>(step_), learning_rate(config_, step_ - 1),
                peak, static_cast<long long>(global_batch_));
  return invalid_input(buf);
}

Result<TrainSummary> Trainer::run(MetricsWriter& metrics) {
  // Every way out of run() waits for the checkpoint being written: its caller may read the last
  // one at once (a diverged run's last good checkpoint), and reading it while the writer renames
  // a new one over it mixed two checkpoints (a checksum mismatch). An error path's write error
  // is lost to the error that ended the run.
  struct SettleCheckpoint {
    CheckpointWriter& writer;
    ~SettleCheckpoint() { (void)writer.wait(); }
  } settle{ckpt_writer_};
  TrainSummary sum;
  const auto start = std::chrono::steady_clock::now();
  const int64_t per_epoch = sampler_->steps_per_epoch();
  const int64_t eval_every = config_.eval_every > 0 ? config_.eval_every : per_epoch;
  int64_t timed = 0;
  double timed_s = 0.0;
  const int64_t first_step = step_;
  ckpt_at_ = start;
  while (step_ < config_.steps) {
    const bool log = (step_ + 1) % config_.log_every == 0 || step_ + 1 == config_.steps;
    auto loss = step(log);
    if (!loss) return loss.error();
    if (step_ > 1) {  // the first steps warm caches and page in buffers
      ++timed;
      timed_s += last_.step_s;
      sum.compute_s += last_.compute_s;
      sum.comm_s += last_.comm_s;
    }
    if (log) {
      sum.final_loss = *loss;
      if (rank() == 0) metrics.write(last_);
      // The global loss: every rank sees the same value and stops here alike, before a
      // checkpoint of the ruined parameters could replace the last good one.
      if (!std::isfinite(*loss)) {
        diverged_ = true;
        return diverged_error(std::string("the loss is ") +
                              (std::isnan(*loss) ? "NaN" : "infinite"));
      }
    }
    if (stop_agreed_) {
      DLTUNE_LOG(kInfo, "engine") << "stop requested: stopping after step " << step_;
      sum.stopped = true;
      break;
    }
    if (heldout_ && heldout_->size > 0 && (step_ % eval_every == 0 || step_ == config_.steps)) {
      const auto e0 = std::chrono::steady_clock::now();
      auto em = evaluate();
      if (!em) return em.error();
      trace_->complete("eval", kTraceCompute, e0, std::chrono::steady_clock::now(), step_);
      sum.heldout_accuracy = em->accuracy;
      sum.heldout_loss = em->loss;
      if (rank() == 0) metrics.write(*em);
      DLTUNE_LOG(kInfo, "engine") << "step " << step_ << " held-out accuracy " << em->accuracy;
    }
    auto by_time = checkpoint_due_by_time();
    if (!by_time) return by_time.error();
    if (!config_.checkpoint_path.empty() &&
        ((config_.checkpoint_every > 0 && step_ % config_.checkpoint_every == 0) || *by_time)) {
      const auto c0 = std::chrono::steady_clock::now();
      ckpt_at_ = c0;
      DLTUNE_TRY(checkpoint(config_.checkpoint_path));
      trace_->complete("checkpoint", kTraceCompute, c0, std::chrono::steady_clock::now(), step_);
    }
  }
  // The last checkpoint: at the end (unless the loop's last one was at this step), and written
  // before run() returns.
  if (!config_.checkpoint_path.empty()) {
    if (ckpt_step_ != step_) DLTUNE_TRY(checkpoint(config_.checkpoint_path));
    const auto w0 = std::chrono::steady_clock::now();
    DLTUNE_TRY(ckpt_writer_.wait());
    ckpt_blocked_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  }
  sum.checkpoints = ckpt_count_;
  sum.checkpoint_blocked_s = ckpt_blocked_s_;
  // A pipeline's rank 0 receives the stages' tensors into the file while training waits
  // (checkpoint_blocked_s); the hash, sync and rename are written in the background.
  sum.checkpoint_write_s = ckpt_writer_.write_s();
  sum.checkpoint_background = true;
  DLTUNE_TRY(trace_->close());
  sum.steps = step_;
  sum.steps_run = step_ - first_step;
  sum.timed_steps = timed;
  sum.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sum.samples_per_s = timed > 0 ? static_cast<double>(timed) * global_batch_ / timed_s : 0.0;
  return sum;
}

}  // namespace dltune::engine
