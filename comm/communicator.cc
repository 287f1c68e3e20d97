#include "comm/communicator.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include <time.h>

#include "comm/shm_segment.h"
#include "common/env.h"
#include "common/strings.h"

namespace dltune::comm {

// ---- requests and the communication thread -------------------------------------------------

struct Request::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
};

Status Request::wait() {
  DLTUNE_CHECK(state_ != nullptr, "wait() on an invalid Request");
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  return state_->status;
}

bool Request::test() const {
  DLTUNE_CHECK(state_ != nullptr, "test() on an invalid Request");
  std::lock_guard lock(state_->mu);
  return state_->done;
}

// One worker thread running queued operations in order. An inline (blocking) operation runs
// on the caller's thread only while the queue is empty and the worker idle, and holds the
// worker off while it runs, so that at most one collective uses the communicator at a time.
class CommThread {
 public:
  CommThread() : worker_([this] { loop(); }) {}
  ~CommThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  Request enqueue(std::function<Status()> op) {
    auto state = std::make_shared<Request::State>();
    {
      std::lock_guard lock(mu_);
      queue_.emplace_back(std::move(op), state);
    }
    cv_.notify_all();
    return Request(state);
  }

  // Runs op inline when idle; returns false (op not run) when work is pending.
  bool try_begin_inline() {
    std::lock_guard lock(mu_);
    if (!queue_.empty() || busy_) return false;
    inline_ = true;
    return true;
  }
  void end_inline() {
    {
      std::lock_guard lock(mu_);
      inline_ = false;
    }
    cv_.notify_all();
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || (!queue_.empty() && !inline_); });
      // On stop, queued operations still run: their requests must complete.
      if (queue_.empty()) return;
      auto [op, state] = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      Status s = op();
      {
        std::lock_guard slock(state->mu);
        state->status = std::move(s);
        state->done = true;
      }
      state->cv.notify_all();
      lock.lock();
      busy_ = false;
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<Status()>, std::shared_ptr<Request::State>>> queue_;
  bool busy_ = false;
  bool inline_ = false;
  bool stop_ = false;
  std::thread worker_;
};

// ---- scratch -----------------------------------------------------------------------------

struct Communicator::Scratch {
  struct Block {
    void* p = nullptr;
    size_t bytes = 0;
  };
  Block blocks[kScratchSlots];
  ~Scratch() {
    for (Block& b : blocks) std::free(b.p);
  }
};

namespace {
std::chrono::milliseconds default_timeout() {
  auto v = strings::parse_int(env::get(env::kCommTimeout));
  if (!v || *v <= 0) return std::chrono::milliseconds(300000);
  return std::chrono::milliseconds(*v);
}
}  // namespace

Communicator::Communicator() : scratch_(std::make_unique<Scratch>()), timeout_(default_timeout()) {}

Communicator::~Communicator() = default;

void Communicator::stop_comm_thread() { thread_.reset(); }

void* Communicator::scratch(int slot, size_t bytes) {
  DLTUNE_CHECK(slot >= 0 && slot < kScratchSlots, "scratch slot out of range");
  Scratch::Block& b = scratch_->blocks[slot];
  if (bytes > b.bytes || b.p == nullptr) {
    // Grow geometrically so that a sweep of sizes re-allocates O(log) times.
    size_t want = std::max<size_t>({bytes, b.bytes * 2, 4096});
    want = (want + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, want);
    DLTUNE_CHECK(p != nullptr, "out of memory for " + std::to_string(want) + " scratch bytes");
    std::memset(p, 0, want);  // pre-fault: no page faults inside a collective
    std::free(b.p);
    b.p = p;
    b.bytes = want;
  }
  return b.p;
}

Status Communicator::native_allreduce(const void*, void*, size_t, DataType, ReduceOp) {
  return unsupported("the 'native' algorithm needs a transport with its own allreduce (MPI); " +
                     describe() + " has none");
}

// ---- shared memory -------------------------------------------------------------------------

void* SharedBuffer::peer(int local_rank) const {
  DLTUNE_CHECK(segment_ != nullptr, "peer() on an empty SharedBuffer");
  DLTUNE_CHECK(local_rank >= 0 && local_rank < segment_->local_size(), "local rank out of range");
  return segment_->region(local_rank);
}

Result<SharedBuffer> Communicator::alloc_shared(size_t bytes) {
  Communicator& loc = local();
  auto seg = SharedSegment::create(loc, bytes, deadline_from_now());
  if (!seg)
    return seg.error().wrap("allocating " + strings::format_bytes(bytes) +
                            " of node-shared memory on " + describe());
  auto& list = loc.segments_;
  std::erase_if(list, [](const std::weak_ptr<SharedSegment>& w) { return w.expired(); });
  list.push_back(*seg);
  return SharedBuffer(*seg, (*seg)->region((*seg)->local_rank()), bytes);
}

std::optional<Communicator::SharedSpan> Communicator::find_shared(const void* p, size_t bytes) {
  const auto* q = static_cast<const uint8_t*>(p);
  for (const auto& w : local().segments_) {
    auto seg = w.lock();
    if (!seg) continue;
    const uint8_t* base = seg->region(seg->local_rank());
    if (q >= base && q + bytes <= base + seg->bytes_per_rank()) {
      return SharedSpan{seg, static_cast<size_t>(q - base)};
    }
  }
  return std::nullopt;
}

Result<SharedSegment*> Communicator::staging_segment(size_t bytes_per_rank) {
  Communicator& loc = local();
  if (loc.staging_ && loc.staging_->bytes_per_rank() >= bytes_per_rank) return loc.staging_.get();
  size_t want = std::max<size_t>(
      bytes_per_rank, loc.staging_ ? 2 * loc.staging_->bytes_per_rank() : size_t{64} << 10);
  loc.staging_.reset();
  auto seg = SharedSegment::create(loc, want, deadline_from_now());
  if (!seg) return seg.error().wrap("allocating a shared staging segment on " + describe());
  loc.staging_ = *seg;
  return loc.staging_.get();
}

// ---- collectives on the communication thread -------------------------------------------------

Deadline coarse_deadline(std::chrono::milliseconds timeout) {
  timespec ts{};
  if (timeout < std::chrono::seconds(1) || clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0) {
    return Clock::now() + timeout;  // a tick matters to a short timeout
  }
  return Deadline(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)) + timeout;
}

bool Communicator::begin_inline() { return !thread_ || thread_->try_begin_inline(); }

void Communicator::end_inline() {
  if (thread_) thread_->end_inline();
}

Status Communicator::run_queued(std::function<Status()> op) {
  return thread_->enqueue(std::move(op)).wait();
}

Request Communicator::start_async(std::function<Status()> op) {
  if (!thread_) thread_ = std::make_unique<CommThread>();
  return thread_->enqueue(std::move(op));
}

}  // namespace dltune::comm
