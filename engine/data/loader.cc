#include "engine/data/loader.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "engine/core/rng.h"

namespace dltune::engine {

uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index) {
  return Rng::mix(Rng::mix(seed, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(index));
}

BatchLoader::BatchLoader(const Dataset& data, const Sampler& sampler, LoaderOptions options)
    : data_(data), sampler_(sampler), o_(options) {
  o_.threads = std::max(1, o_.threads);
  o_.depth = std::max(1, o_.depth);
  sample_numel_ = data.sample_numel();
  label_width_ = data.label_width;
  slots_.resize(static_cast<size_t>(o_.depth));
  for (int t = 0; t < o_.threads; ++t) threads_.emplace_back([this] { work(); });
}

void BatchLoader::release() {
  std::unique_lock<std::mutex> lock(mu_);
  drain(lock);
  for (Slot& s : slots_) {
    s.step = -1;
    s.filled = false;
    std::vector<float>().swap(s.x);
    std::vector<int32_t>().swap(s.y);
  }
}

BatchLoader::~BatchLoader() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    drain(lock);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void BatchLoader::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
    if (stop_) return;
    const Task t = tasks_.front();
    tasks_.pop_front();
    ++running_;
    lock.unlock();
    Status st = t.reader->read(t.index, t.seed, t.x, t.y);
    lock.lock();
    --running_;
    if (!st && t.slot->error) t.slot->error = std::move(st);
    if (--t.slot->pending == 0 || running_ == 0) done_cv_.notify_all();
  }
}

void BatchLoader::fill(Slot& slot, int64_t step, bool now) {
  const auto b = static_cast<size_t>(sampler_.local_count());  // allocated on first use
  if (o_.inputs) slot.x.resize(b * static_cast<size_t>(sample_numel_));
  if (o_.labels) slot.y.resize(b * static_cast<size_t>(label_width_));
  slot.step = step;
  slot.error = ok_status();
  slot.pending = 0;
  slot.filled = now || step < o_.end_step;
  if (!slot.filled) return;
  sampler_.indices(step, indices_);
  const int64_t epoch = sampler_.epoch_of(step);
  for (size_t i = 0; i < indices_.size(); ++i) {
    float* x = o_.inputs ? slot.x.data() + i * static_cast<size_t>(sample_numel_) : nullptr;
    int32_t* y = o_.labels ? slot.y.data() + i * static_cast<size_t>(label_width_) : nullptr;
    tasks_.push_back(
        {&slot, data_.reader.get(), indices_[i], sample_seed(o_.seed, epoch, indices_[i]), x, y});
    ++slot.pending;
  }
  work_cv_.notify_all();
}

void BatchLoader::drain(std::unique_lock<std::mutex>& lock) {
  for (const Task& t : tasks_) --t.slot->pending;
  tasks_.clear();
  done_cv_.wait(lock, [this] { return running_ == 0; });
}

Status BatchLoader::next(int64_t step, float* x, int32_t* y) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  auto it =
      std::find_if(slots_.begin(), slots_.end(), [&](const Slot& s) { return s.step == step; });
  if (it == slots_.end()) {  // the first step, or out of order: start over at `step`
    drain(lock);
    for (size_t k = 0; k < slots_.size(); ++k) fill(slots_[k], step + static_cast<int64_t>(k));
    it = slots_.begin();
  }
  Slot& slot = *it;
  if (!slot.filled) fill(slot, step, /*now=*/true);  // past the planned end: read it now
  done_cv_.wait(lock, [&] { return slot.pending == 0; });
  last_wait_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  waited_ += last_wait_;
  Status st = slot.error;
  if (st) {
    if (x) std::memcpy(x, slot.x.data(), slot.x.size() * sizeof(float));
    if (y) std::memcpy(y, slot.y.data(), slot.y.size() * sizeof(int32_t));
  }
  fill(slot, step + o_.depth);
  if (!st) return std::move(st).error().wrap("reading the batch of step " + std::to_string(step));
  return ok_status();
}

Status BatchLoader::read(const Dataset& data, int64_t first, int count, float* x, int32_t* y) {
  Slot local;
  std::unique_lock<std::mutex> lock(mu_);
  for (int i = 0; i < count; ++i) {
    tasks_.push_back({&local, data.reader.get(), first + i, 0,
                      x ? x + static_cast<int64_t>(i) * data.sample_numel() : nullptr,
                      y ? y + static_cast<int64_t>(i) * data.label_width : nullptr});
    ++local.pending;
  }
  work_cv_.notify_all();
  done_cv_.wait(lock, [&] { return local.pending == 0; });
  if (!local.error) return std::move(local.error).error().wrap("reading held-out samples");
  return ok_status();
}

}  // namespace dltune::engine
