#include "engine/io/checkpoint_writer.h"

#include <chrono>
#include <cstring>

namespace dltune::engine {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// dst = src, reusing dst's memory when it is large enough.
void copy_into(std::vector<float>& dst, std::span<const float> src) {
  dst.resize(src.size());
  if (!src.empty()) std::memcpy(dst.data(), src.data(), src.size_bytes());
}

}  // namespace

CheckpointWriter::~CheckpointWriter() {
  if (thread_.joinable()) thread_.join();
}

Status CheckpointWriter::wait() {
  if (!thread_.joinable()) return ok_status();
  thread_.join();
  write_s_ += thread_write_s_;
  Status r = std::move(result_);
  result_ = ok_status();
  return r;
}

Status CheckpointWriter::start(const std::string& path, const Checkpoint& header,
                               std::span<const float> params,
                               const std::vector<std::span<const float>>& slots,
                               std::span<const float> state) {
  DLTUNE_TRY(wait());
  copy_into(params_, params);
  slots_.resize(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) copy_into(slots_[i], slots[i]);
  copy_into(state_, state);
  ++writes_;
  // The thread owns nothing but reads the snapshot, which start() touches again only after
  // joining it.
  thread_ = std::thread([this, path, header] {
    const auto w0 = Clock::now();
    std::vector<std::span<const float>> s(slots_.begin(), slots_.end());
    result_ = save_checkpoint(path, header, params_, s, state_);
    thread_write_s_ = seconds_since(w0);
  });
  return ok_status();
}

Status CheckpointWriter::finish_in_background(std::unique_ptr<CheckpointStream> stream) {
  if (thread_.joinable())
    return internal_error("checkpoint writer: a write is still in flight (wait() first)");
  ++writes_;
  thread_ = std::thread([this, s = std::move(stream)]() mutable {
    const auto w0 = Clock::now();
    result_ = s->finish();
    s.reset();  // an unfinished stream removes its temporary file
    thread_write_s_ = seconds_since(w0);
  });
  return ok_status();
}

int64_t CheckpointWriter::snapshot_bytes() const {
  size_t n = params_.size() + state_.size();
  for (const auto& s : slots_) n += s.size();
  return static_cast<int64_t>(n * sizeof(float));
}

}  // namespace dltune::engine
