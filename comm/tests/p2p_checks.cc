// Point-to-point checks of comm/tests/comm_checks.h.
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <time.h>

#include "comm/allreduce.h"
#include "comm/tests/comm_checks.h"
#include "comm/tests/test_util.h"

namespace dltune::comm::testing {
namespace {

using std::chrono::milliseconds;

#define EXPECT_OR_FAIL(cond, what)                                                        \
  do {                                                                                    \
    if (!(cond)) return internal_error(std::string("expected ") + #cond + ": " + (what)); \
  } while (0)

template <typename T>
bool says(const Result<T>& s, ErrorKind kind, const std::string& text) {
  return !s.ok() && s.error().kind() == kind && s.error().message().find(text) != std::string::npos;
}

template <typename T>
std::string message(const Result<T>& s) {
  return s.ok() ? "OK" : s.error().message();
}

// The bytes world rank `sender` sends with `tag`.
std::vector<uint8_t> pattern(int sender, int tag, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(sender * 31 + tag * 7 + i * 13);
  return v;
}

// Message sizes by tag: empty, small, and rendezvous-sized (MPI's eager limit is a few KiB).
size_t size_for(int tag) {
  const int i = tag % 64;
  if (i % 8 == 0) return 0;
  if (i % 8 == 3) return 200000 + static_cast<size_t>(i);
  return 1 + 37 * static_cast<size_t>(i);
}

// n messages to each ring neighbour (tags tag_base + i to the right, tag_base + 1000 + i to
// the left), half the receives posted before the sends and half after, sends in a scrambled
// order; completed through wait_any (or one start_batch and wait_all). world_of[r]: the
// world rank of rank r, which the contents depend on.
Status ring_exchange(Communicator& c, const std::vector<int>& world_of, int tag_base, int n,
                     bool batch) {
  const int p = c.size(), me = c.rank();
  if (p < 2) return ok_status();
  const int right = (me + 1) % p, left = (me - 1 + p) % p;
  auto w = [&](int r) { return world_of[static_cast<size_t>(r)]; };
  const size_t nn = static_cast<size_t>(n);
  std::vector<std::vector<uint8_t>> out(2 * nn), in(2 * nn);
  std::vector<P2pOp> sends, early, late;
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    const int to_right = tag_base + i, to_left = tag_base + 1000 + i;
    out[k] = pattern(w(me), to_right, size_for(to_right));
    out[nn + k] = pattern(w(me), to_left, size_for(to_left));
    in[k].resize(size_for(to_right));  // from the left, sent to its right
    in[nn + k].resize(size_for(to_left));
    auto& recvs = i % 2 == 0 ? early : late;
    recvs.push_back(P2pOp::recv(left, to_right, in[k].data(), in[k].size()));
    recvs.push_back(P2pOp::recv(right, to_left, in[nn + k].data(), in[nn + k].size()));
  }
  for (size_t j = 0; j < 2 * nn; ++j) {
    const size_t k = j * 7 % (2 * nn);  // 7 is prime to 2n for the n used here
    const int tag =
        k < nn ? tag_base + static_cast<int>(k) : tag_base + 1000 + static_cast<int>(k - nn);
    sends.push_back(P2pOp::send(k < nn ? right : left, tag, out[k].data(), out[k].size()));
  }
  std::vector<P2pOp> ops = early;
  ops.insert(ops.end(), sends.begin(), sends.end());
  ops.insert(ops.end(), late.begin(), late.end());
  std::vector<Request> reqs;
  if (batch) {
    reqs = c.start_batch(ops);
    DLTUNE_TRY(wait_all(reqs));
  } else {
    for (const P2pOp& op : ops) {
      reqs.push_back(op.kind == P2pOp::Kind::kSend ? c.isend(op.peer, op.tag, op.data, op.bytes)
                                                   : c.irecv(op.peer, op.tag, op.data, op.bytes));
    }
    std::vector<bool> seen(reqs.size(), false);
    for (size_t done = 0; done < reqs.size(); ++done) {
      auto i = wait_any(reqs, c.deadline_from_now());
      if (!i) return i.error();
      EXPECT_OR_FAIL(!seen[*i] && !reqs[*i].valid(), "request " + std::to_string(*i) + " twice");
      seen[*i] = true;
    }
    auto none = wait_any(reqs, c.deadline_from_now());
    EXPECT_OR_FAIL(says(none, ErrorKind::kInvalidInput, "none is valid"), message(none));
  }
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    const int to_right = tag_base + i, to_left = tag_base + 1000 + i;
    EXPECT_OR_FAIL(in[k] == pattern(w(left), to_right, in[k].size()),
                   "message with tag " + std::to_string(to_right));
    EXPECT_OR_FAIL(in[nn + k] == pattern(w(right), to_left, in[nn + k].size()),
                   "message with tag " + std::to_string(to_left));
  }
  return ok_status();
}

std::vector<int> identity(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

}  // namespace

Status check_p2p_out_of_order(Communicator& c) {
  const int p = c.size(), me = c.rank();
  if (p < 2) return ok_status();
  const int right = (me + 1) % p, left = (me - 1 + p) % p;
  constexpr int kAck = 999;
  const std::vector<size_t> sizes = {1, 100, 4096, 300000, 17};
  const int n = static_cast<int>(sizes.size());
  std::vector<std::vector<uint8_t>> in(sizes.size()), out(sizes.size());
  std::vector<Request> recvs, sends;
  for (int t = 0; t < n; ++t) {
    in[static_cast<size_t>(t)].resize(sizes[static_cast<size_t>(t)]);
    out[static_cast<size_t>(t)] = pattern(me, t, sizes[static_cast<size_t>(t)]);
    recvs.push_back(
        c.irecv(left, t, in[static_cast<size_t>(t)].data(), in[static_cast<size_t>(t)].size()));
  }
  for (int t = n - 1; t >= 0; --t) {  // highest tag first, one at a time
    const auto k = static_cast<size_t>(t);
    sends.push_back(c.isend(right, t, out[k].data(), out[k].size()));
    auto i = wait_any(recvs, c.deadline_from_now());
    if (!i) return i.error().wrap("waiting for tag " + std::to_string(t));
    EXPECT_OR_FAIL(*i == k, "wait_any gave request " + std::to_string(*i) + " while only tag " +
                                std::to_string(t) + "'s message was sent");
    EXPECT_OR_FAIL(in[k] == pattern(left, t, sizes[k]), "tag " + std::to_string(t));
    char ack = 1;
    DLTUNE_TRY(c.send(left, kAck, &ack, 1, c.deadline_from_now()));
    DLTUNE_TRY(c.recv(right, kAck, &ack, 1, c.deadline_from_now()));
  }
  return wait_all(sends);
}

Status check_p2p_many_in_flight(Communicator& c) {
  DLTUNE_TRY_CTX(ring_exchange(c, identity(c.size()), 2000, 32, false), "one by one");
  DLTUNE_TRY_CTX(ring_exchange(c, identity(c.size()), 4000, 32, true), "as a batch");
  return ok_status();
}

Status check_p2p_same_tag_order(Communicator& c) {
  const int p = c.size(), me = c.rank();
  if (p < 2) return ok_status();
  const int right = (me + 1) % p, left = (me - 1 + p) % p;
  constexpr int kTag = 7, kCount = 6;
  constexpr size_t kBytes = 64;  // eager: a blocking send returns before it is received
  std::vector<std::vector<uint8_t>> out, in(kCount, std::vector<uint8_t>(kBytes));
  for (int j = 0; j < kCount; ++j) out.push_back(pattern(me, 100 + j, kBytes));
  std::vector<Request> reqs;
  reqs.push_back(c.irecv(left, kTag, in[0].data(), kBytes));  // posted before anything is sent
  DLTUNE_TRY(c.send(right, kTag, out[0].data(), kBytes, c.deadline_from_now()));
  DLTUNE_TRY(c.send(right, kTag, out[1].data(), kBytes, c.deadline_from_now()));
  for (int j = 2; j < kCount; ++j)
    reqs.push_back(c.isend(right, kTag, out[static_cast<size_t>(j)].data(), kBytes));
  DLTUNE_TRY(c.recv(left, kTag, in[1].data(), kBytes, c.deadline_from_now()));
  for (int j = 2; j < kCount; ++j)
    reqs.push_back(c.irecv(left, kTag, in[static_cast<size_t>(j)].data(), kBytes));
  DLTUNE_TRY(wait_all(reqs));
  for (int j = 0; j < kCount; ++j) {
    EXPECT_OR_FAIL(in[static_cast<size_t>(j)] == pattern(left, 100 + j, kBytes),
                   "message " + std::to_string(j) + " of one tag arrived out of order");
  }
  return ok_status();
}

Status check_wait_any(Communicator& c) {
  std::vector<Request> none(3);
  auto empty = wait_any(none, Clock::now() + milliseconds(100));
  EXPECT_OR_FAIL(says(empty, ErrorKind::kInvalidInput, "none is valid"), message(empty));
  const int p = c.size(), me = c.rank();
  if (p < 2) return ok_status();
  const int right = (me + 1) % p, left = (me - 1 + p) % p;

  // A timeout leaves the request pending; its message then completes it; it is consumed.
  uint32_t got = 0;
  std::vector<Request> reqs = {c.irecv(left, 50, &got, 4)};
  const auto start = Clock::now();
  auto late = wait_any(reqs, start + milliseconds(100));
  EXPECT_OR_FAIL(says(late, ErrorKind::kTimeout, "in time"), message(late));
  EXPECT_OR_FAIL(Clock::now() - start >= milliseconds(99) && reqs[0].valid(), "timeout");
  char ready = 1;  // send only once the right neighbour's wait timed out
  DLTUNE_TRY(c.send(left, 53, &ready, 1, c.deadline_from_now()));
  DLTUNE_TRY(c.recv(right, 53, &ready, 1, c.deadline_from_now()));
  const uint32_t v = 1234 + static_cast<uint32_t>(me);
  DLTUNE_TRY(c.send(right, 50, &v, 4, c.deadline_from_now()));
  auto first = wait_any(reqs, c.deadline_from_now());
  EXPECT_OR_FAIL(first.ok() && *first == 0 && !reqs[0].valid(), message(first));
  EXPECT_OR_FAIL(got == 1234 + static_cast<uint32_t>(left), "wrong value");
  auto gone = wait_any(reqs, c.deadline_from_now());
  EXPECT_OR_FAIL(says(gone, ErrorKind::kInvalidInput, "none is valid"), message(gone));

  // An operation's error comes out of wait_any, naming the request; both get consumed.
  uint32_t small = 0, fine = 0;
  std::vector<Request> two = {c.irecv(left, 51, &small, 4), c.irecv(left, 52, &fine, 4)};
  const uint64_t big = 7;
  const uint32_t nine = 9;
  DLTUNE_TRY(c.send(right, 51, &big, 8, c.deadline_from_now()));
  DLTUNE_TRY(c.send(right, 52, &nine, 4, c.deadline_from_now()));
  bool failed = false, succeeded = false;
  for (int k = 0; k < 2; ++k) {
    auto i = wait_any(two, c.deadline_from_now());
    if (i.ok()) {
      EXPECT_OR_FAIL(*i == 1 && fine == 9 && !succeeded, "the good request");
      succeeded = true;
    } else {
      EXPECT_OR_FAIL(says(i, ErrorKind::kInvalidInput, "request 0") && !failed,
                     i.error().message());
      failed = true;
    }
  }
  EXPECT_OR_FAIL(failed && succeeded && !two[0].valid() && !two[1].valid(), "both consumed");
  return ok_status();
}

Status check_wait_any_sleeps(Communicator& c) {
  const int p = c.size(), me = c.rank();
  if (p < 2) return ok_status();
  const int right = (me + 1) % p, left = (me - 1 + p) % p;
  int v = 0;
  std::vector<Request> reqs = {c.irecv(left, 55, &v, sizeof v)};
  const int one = 1;
  if (me == 0) {  // starts a chain around the ring: every other rank waits >= 0.3 s
    std::this_thread::sleep_for(milliseconds(300));
    DLTUNE_TRY(c.send(right, 55, &one, sizeof one, c.deadline_from_now()));
  }
  timespec t0{}, t1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  auto i = wait_any(reqs, c.deadline_from_now());
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
  if (!i) return i.error();
  const double cpu = static_cast<double>(t1.tv_sec - t0.tv_sec) +
                     1e-9 * static_cast<double>(t1.tv_nsec - t0.tv_nsec);
  EXPECT_OR_FAIL(cpu < 0.1, "waiting ~0.3 s used " + std::to_string(cpu) + " s of CPU");
  if (me != 0) DLTUNE_TRY(c.send(right, 55, &one, sizeof one, c.deadline_from_now()));
  return ok_status();
}

Status check_p2p_zero_bytes(Communicator& c) {
  const int p = c.size(), me = c.rank();
  const int right = (me + 1) % p, left = (me - 1 + p) % p;
  std::vector<Request> reqs = {c.irecv(left, 60, nullptr, 0), c.isend(right, 60, nullptr, 0)};
  DLTUNE_TRY(wait_all(reqs));
  if (p < 2) return ok_status();  // a blocking send to oneself would need a posted receive
  DLTUNE_TRY(c.send(right, 61, nullptr, 0, c.deadline_from_now()));
  return c.recv(left, 61, nullptr, 0, c.deadline_from_now());
}

Status check_p2p_size_mismatch(Communicator& c) {
  const int p = c.size(), me = c.rank();
  const int right = (me + 1) % p, left = (me - 1 + p) % p;
  std::vector<uint8_t> s16(16, 1), s8(8, 2), r8(8), r16(16);
  Request too_big = c.irecv(left, 70, r8.data(), r8.size());
  Request too_small = c.irecv(left, 71, r16.data(), r16.size());
  std::vector<Request> sends = {c.isend(right, 70, s16.data(), 16),
                                c.isend(right, 71, s8.data(), 8)};
  Status a = too_big.wait(), b = too_small.wait();
  EXPECT_OR_FAIL(says(a, ErrorKind::kInvalidInput, "same count"), message(a));
  EXPECT_OR_FAIL(says(b, ErrorKind::kInvalidInput, "sent 8 bytes"), message(b));
  return wait_all(sends);
}

Status check_p2p_timeout(Communicator& c) {
  const int p = c.size(), me = c.rank();
  uint32_t v = 0;
  const auto start = Clock::now();
  Request r = c.irecv((me - 1 + p) % p, 80, &v, 4, start + milliseconds(150));
  Status s = r.wait();
  const auto took = Clock::now() - start;
  EXPECT_OR_FAIL(says(s, ErrorKind::kTimeout, "in time"), message(s));
  EXPECT_OR_FAIL(took >= milliseconds(149) && took < std::chrono::seconds(20), "timeout took long");
  EXPECT_OR_FAIL(r.test(), "a timed-out request is finished");
  int one = 1;  // keep the ranks in step before the next check
  AllreduceOptions o;
  return allreduce(c, &one, &one, 1, DataType::kI32, ReduceOp::kSum, o);
}

Status check_p2p_bad_arguments(Communicator& c) {
  int x = 0;
  const std::vector<Request> bad = {c.isend(-1, 0, &x, 4), c.isend(c.size(), 0, &x, 4),
                                    c.irecv(0, -1, &x, 4), c.irecv(0, kReservedTagBase, &x, 4)};
  for (Request r : bad) {
    EXPECT_OR_FAIL(r.test(), "a rejected request is finished at once");
    Status s = r.wait();
    EXPECT_OR_FAIL(says(s, ErrorKind::kInvalidInput, ""), message(s));
  }
  const std::vector<P2pOp> ops = {P2pOp::send(0, 3, &x, 4), P2pOp::recv(c.size(), 3, &x, 4)};
  auto reqs = c.start_batch(ops);
  EXPECT_OR_FAIL(reqs.size() == 2, "one request per operation");
  for (Request& r : reqs) {
    Status s = r.wait();
    EXPECT_OR_FAIL(says(s, ErrorKind::kInvalidInput, "operation 1 of a batch"), message(s));
  }
  return ok_status();
}

Status check_p2p_cancel_on_destroy(Communicator& world) {
  auto g = world.split(0, world.rank());
  if (!g) return g.error();
  const int p = (*g)->size(), me = (*g)->rank();
  uint32_t v = 0;
  Request r = (*g)->irecv((me - 1 + p) % p, 90, &v, 4);  // nobody sends it
  EXPECT_OR_FAIL(!r.test(), "nothing was sent");
  g->reset();
  EXPECT_OR_FAIL(r.test(), "destroying the communicator finished the request");
  Status s = r.wait();
  EXPECT_OR_FAIL(says(s, ErrorKind::kInternal, "destroyed"), message(s));
  return ok_status();
}

Status check_p2p_with_group_allreduce(Communicator& world) {
  const int p = world.size(), me = world.rank();
  const int stages = p % 2 == 0 ? 2 : 1, stage = me % stages, replica = me / stages;
  auto g = world.split(stage, replica);
  if (!g) return g.error();
  std::vector<int> members;
  for (int r = stage; r < p; r += stages) members.push_back(r);
  const std::vector<Algorithm> algos = {Algorithm::kRing, Algorithm::kRecursiveDoubling,
                                        Algorithm::kRabenseifner, Algorithm::kHierarchical};
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<float>> buckets;
    std::vector<Request> reduces;
    for (size_t b = 0; b < algos.size(); ++b) buckets.push_back(make_input<float>(me, 30000 + b));
    for (size_t b = 0; b < algos.size(); ++b) {
      AllreduceOptions o;
      o.algorithm = algos[b];
      reduces.push_back(allreduce_async(**g, buckets[b].data(), buckets[b].data(),
                                        buckets[b].size(), DataType::kF32, ReduceOp::kSum, o));
    }
    DLTUNE_TRY_CTX(ring_exchange(world, identity(p), 100 * round, 8, false), "on the world");
    DLTUNE_TRY_CTX(ring_exchange(**g, members, 6000 + 100 * round, 4, round == 2), "on the group");
    DLTUNE_TRY(wait_all(reduces));
    for (size_t b = 0; b < algos.size(); ++b) {
      std::vector<float> want(buckets[b].size(), 0.0f);
      for (int w : members) {
        const auto in = make_input<float>(w, want.size());
        for (size_t i = 0; i < want.size(); ++i) want[i] += in[i];
      }
      EXPECT_OR_FAIL(buckets[b] == want,
                     "bucket " + std::to_string(b) + " of round " + std::to_string(round));
    }
  }
  return ok_status();
}

}  // namespace dltune::comm::testing
