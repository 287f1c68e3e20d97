#include "comm/communicator.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include <time.h>

#include "comm/request_state.h"
#include "comm/shm_segment.h"
#include "common/env.h"
#include "common/strings.h"

namespace dltune::comm {

// ---- requests and the communication thread -------------------------------------------------

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
      state->finish(op());
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

// ---- point-to-point and groups -----------------------------------------------------------------

namespace dltune::comm {

Status Communicator::check_p2p(int peer, int tag, const char* role) const {
  if (peer < 0 || peer >= size()) {
    return invalid_input(std::string(role) + " rank " + std::to_string(peer) +
                         " is not a rank of " + describe());
  }
  if (tag < 0 || tag >= kReservedTagBase) {
    return invalid_input("tag " + std::to_string(tag) + " is outside the user tags [0, " +
                         std::to_string(kReservedTagBase) + ") on " + describe());
  }
  return ok_status();
}

Request Communicator::isend(int dst, int tag, const void* data, size_t bytes) {
  return isend(dst, tag, data, bytes, deadline_from_now());
}

Request Communicator::isend(int dst, int tag, const void* data, size_t bytes, Deadline deadline) {
  if (Status s = check_p2p(dst, tag, "destination"); !s) return Request::finished(std::move(s));
  return start_send(dst, tag, data, bytes, deadline);
}

Request Communicator::irecv(int src, int tag, void* data, size_t bytes) {
  return irecv(src, tag, data, bytes, deadline_from_now());
}

Request Communicator::irecv(int src, int tag, void* data, size_t bytes, Deadline deadline) {
  if (Status s = check_p2p(src, tag, "source"); !s) return Request::finished(std::move(s));
  return start_recv(src, tag, data, bytes, deadline);
}

std::vector<Request> Communicator::start_batch(std::span<const P2pOp> ops) {
  return start_batch(ops, deadline_from_now());
}

std::vector<Request> Communicator::start_batch(std::span<const P2pOp> ops, Deadline deadline) {
  // One bad operation fails the whole batch before anything starts: half a batch on NCCL would
  // leave the peers' matching halves waiting.
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool send = ops[i].kind == P2pOp::Kind::kSend;
    Status s = check_p2p(ops[i].peer, ops[i].tag, send ? "destination" : "source");
    if (!s) {
      Error e = std::move(s).error().wrap("operation " + std::to_string(i) + " of a batch");
      std::vector<Request> out;
      for (size_t k = 0; k < ops.size(); ++k) out.push_back(Request::finished(e));
      return out;
    }
  }
  if (ops.empty()) return {};
  return start_batch_now(ops, deadline);
}

std::vector<Request> Communicator::start_batch_now(std::span<const P2pOp> ops, Deadline deadline) {
  std::vector<Request> out;
  out.reserve(ops.size());
  for (const P2pOp& op : ops) {
    out.push_back(op.kind == P2pOp::Kind::kSend
                      ? start_send(op.peer, op.tag, op.data, op.bytes, deadline)
                      : start_recv(op.peer, op.tag, op.data, op.bytes, deadline));
  }
  return out;
}

Result<std::unique_ptr<Communicator>> Communicator::split(int colour, int key) {
  std::optional<Result<std::unique_ptr<Communicator>>> out;
  Status s = run_collective([&]() -> Status {
    out.emplace(split_now(colour < 0 ? kUndefined : colour, key));
    return ok_status();
  });
  if (!s) return std::move(s).error();
  if (!*out) {
    return std::move(*out).error().wrap("splitting " + describe() + " (colour " +
                                        std::to_string(colour) + ", key " + std::to_string(key) +
                                        ")");
  }
  if (**out) (**out)->set_timeout(timeout());
  return std::move(*out);
}

}  // namespace dltune::comm
