// Multi-process check of the collectives over MPI: run under mpirun -np N (ctest does it for
// N = 2, 3, 4, and for 3 with DLTUNE_COMM_CMA=off). Every algorithm, native and cma included,
// against the serial reference at a representative set of counts, in place and out of place;
// the shared-memory path on alloc_shared buffers; non-blocking requests in order; broadcast;
// the cma probe's agreement; registered private buffers; and a mismatched count ending in an error
// on every rank instead of a hang. Prints one line per failure; exit code 0 when all passed, 1
// otherwise.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

#include "comm/allreduce.h"
#include "comm/cma.h"
#include "comm/mpi_communicator.h"
#include "comm/registration.h"
#include "comm/tests/test_util.h"

namespace dltune::comm {
namespace {

using testing::make_input;
using testing::reference;

int g_failures = 0;

void expect(bool ok, const Communicator& c, const std::string& what) {
  if (!ok) {
    ++g_failures;
    std::fprintf(stderr, "FAIL rank %d: %s\n", c.rank(), what.c_str());
  }
}

void check_algorithms(Communicator& c) {
  const int p = c.size();
  for (Algorithm algo : all_algorithms()) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, (size_t{1} << 20) + 3}) {
      for (bool in_place : {true, false}) {
        auto in = make_input<float>(c.rank(), count);
        std::vector<float> out(count, -1.0f);
        AllreduceOptions o;
        o.algorithm = algo;
        o.segment_bytes = 64 << 10;
        Status s = allreduce(c, in.data(), in_place ? in.data() : out.data(), count, DataType::kF32,
                             ReduceOp::kSum, o);
        const std::string what = std::string(algorithm_name(algo)) + " count " +
                                 std::to_string(count) + (in_place ? " in place" : "");
        expect(s.ok(), c, what + ": " + (s.ok() ? "" : s.error().message()));
        expect((in_place ? in : out) == reference<float>(p, count, ReduceOp::kSum), c,
               what + ": wrong result");
      }
    }
  }
}

void check_shared_and_async(Communicator& c) {
  const size_t count = 300001;
  auto buf = c.alloc_shared(count * sizeof(double));
  expect(buf.ok(), c, "alloc_shared");
  if (!buf) return;
  const auto want = reference<double>(c.size(), count, ReduceOp::kSum);
  auto in = make_input<double>(c.rank(), count);
  std::copy(in.begin(), in.end(), buf->as<double>());
  AllreduceOptions o;
  o.algorithm = Algorithm::kShm;
  Status s = allreduce(c, buf->data(), buf->data(), count, DataType::kF64, ReduceOp::kSum, o);
  expect(s.ok() && std::equal(want.begin(), want.end(), buf->as<double>()), c,
         "shm in place on a shared buffer");

  std::vector<std::vector<double>> bufs(4, in);
  std::vector<Request> reqs;
  for (auto& b : bufs) {
    o.algorithm = &b == &bufs[0] ? Algorithm::kNative : Algorithm::kRing;
    reqs.push_back(
        allreduce_async(c, b.data(), b.data(), count, DataType::kF64, ReduceOp::kSum, o));
  }
  for (size_t i = reqs.size(); i-- > 0;) {
    expect(reqs[i].wait().ok(), c, "async request " + std::to_string(i));
    for (size_t e = 0; e < i; ++e) expect(reqs[e].test(), c, "async order");
  }
  for (auto& b : bufs) expect(b == want, c, "async result");

  std::vector<int> data(1000, c.rank());
  BroadcastOptions bo;
  bo.algorithm = BroadcastAlgorithm::kChain;
  bo.root = c.size() - 1;
  bo.segment_bytes = 512;
  expect(broadcast(c, data.data(), data.size() * sizeof(int), bo).ok() &&
             data == std::vector<int>(1000, c.size() - 1),
         c, "chain broadcast");
}

// The cma allreduce between processes in every type and operation, odd counts spanning
// several of its blocks included, in place and out of place.
template <typename T>
void check_cma_typed(Communicator& c, DataType type, ReduceOp op) {
  for (size_t count : {size_t{1}, size_t{1023}, size_t{300001}}) {
    for (bool in_place : {true, false}) {
      auto in = make_input<T>(c.rank(), count);
      std::vector<T> out(count, T{});
      AllreduceOptions o;
      o.algorithm = Algorithm::kCma;
      Status s = allreduce(c, in.data(), in_place ? in.data() : out.data(), count, type, op, o);
      const std::string what = std::string("cma ") + std::string(dtype_name(type)) + " " +
                               std::string(op_name(op)) + " count " + std::to_string(count) +
                               (in_place ? " in place" : "");
      expect(s.ok(), c, what + ": " + (s.ok() ? "" : s.error().message()));
      expect((in_place ? in : out) == reference<T>(c.size(), count, op), c,
             what + ": wrong result");
    }
  }
}

void check_cma_types(Communicator& c) {
  check_cma_typed<double>(c, DataType::kF64, ReduceOp::kSum);
  check_cma_typed<int32_t>(c, DataType::kI32, ReduceOp::kSum);
  check_cma_typed<int64_t>(c, DataType::kI64, ReduceOp::kMax);
  check_cma_typed<float>(c, DataType::kF32, ReduceOp::kMin);
}

// The cma allreduce's probe between these processes: every rank agrees; with
// DLTUNE_COMM_CMA=off it must be unusable and say so; otherwise (normally usable between the
// processes of one user) it is printed, since a kernel may refuse it (the fallback still sums).
void check_cma_probe(Communicator& c) {
  auto peers = c.cma_peers(c.deadline_from_now());  // probed by check_algorithms already
  expect(peers.ok(), c, "cma probe: " + (peers.ok() ? "" : peers.error().message()));
  if (!peers) return;
  const CmaPeers& p = **peers;
  const char* setting = std::getenv("DLTUNE_COMM_CMA");
  if (setting != nullptr && std::string(setting) == "off") {
    expect(!p.usable && p.reason.find("DLTUNE_COMM_CMA=off") != std::string::npos, c,
           "cma with DLTUNE_COMM_CMA=off: usable " + std::to_string(p.usable) + ", reason '" +
               p.reason + "'");
  } else if (p.usable) {
    expect(p.pids.size() == static_cast<size_t>(c.local().size()) &&
               p.pids[static_cast<size_t>(c.local().rank())] == getpid(),
           c, "cma: the probe's process ids");
  }
  int32_t usable = p.usable ? 1 : 0, lo = 0, hi = 0;
  AllreduceOptions o;
  o.algorithm = Algorithm::kRecursiveDoubling;
  expect(allreduce(c, &usable, &lo, 1, DataType::kI32, ReduceOp::kMin, o).ok() &&
             allreduce(c, &usable, &hi, 1, DataType::kI32, ReduceOp::kMax, o).ok() && lo == hi,
         c, "cma: the ranks disagree on whether cross-memory attach is usable");
  if (c.rank() == 0) {
    std::printf("cma: cross-memory attach %s%s\n",
                p.usable ? "usable" : "refused: ", p.reason.c_str());
  }
}

// The cma allreduce on registered private buffers between processes (comm/registration.h:
// each rank maps its peers' memfds through /proc/PID/fd): every rank's buffer at its own
// misalignment, in place and out of place, several calls, then the buffer's contents after
// deregistering; with DLTUNE_COMM_CMA=off the registration must say why it is inactive and the
// sums still be right.
void check_registered(Communicator& c) {
  const size_t count = 300001;
  const size_t misalign = 4 * static_cast<size_t>(c.rank() % 3);  // differing page offsets
  const auto want = reference<float>(c.size(), count, ReduceOp::kSum);
  testing::Buffer<float> in(count, misalign), out(count, misalign);
  auto rin = c.register_memory(in.data(), count * 4);
  auto rout = c.register_memory(out.data(), count * 4);
  expect(rin.ok() && rout.ok(), c,
         "register_memory: " +
             (rin.ok() ? (rout.ok() ? "" : rout.error().message()) : rin.error().message()));
  if (!rin || !rout) return;
  const char* setting = std::getenv("DLTUNE_COMM_CMA");
  const bool off = setting != nullptr && std::string(setting) == "off";
  expect(rin->active() != off, c,
         "registration active " + std::to_string(rin->active()) + " (" + rin->reason() + ")");
  AllreduceOptions o;
  o.algorithm = Algorithm::kCma;
  for (int call = 0; call < 4; ++call) {
    const bool in_place = call % 2 == 0;
    in.fill(make_input<float>(c.rank(), count));
    Status s = allreduce(c, in.data(), in_place ? in.data() : out.data(), count, DataType::kF32,
                         ReduceOp::kSum, o);
    const std::string what = "cma registered call " + std::to_string(call);
    expect(s.ok(), c, what + ": " + (s.ok() ? "" : s.error().message()));
    expect((in_place ? in : out).read(count) == want, c, what + ": wrong result");
  }
  rin->reset();
  rout->reset();
  expect(out.read(count) == want, c, "cma registered: the buffer changed when deregistered");
}

void check_mismatch(Communicator& c) {
  std::vector<float> v(256, 1.0f);
  AllreduceOptions o;
  o.algorithm = Algorithm::kRing;
  o.timeout = std::chrono::milliseconds(1000);
  const size_t count = c.rank() == 0 ? 100 : 200;  // small: eager messages, nothing left over
  Status s = allreduce(c, v.data(), v.data(), count, DataType::kF32, ReduceOp::kSum, o);
  expect(!s.ok(), c, "mismatched counts were not detected");
  if (!s.ok())
    std::fprintf(stderr, "rank %d (expected): %s\n", c.rank(), s.error().message().c_str());
}

}  // namespace
}  // namespace dltune::comm

int main() {
  using namespace dltune::comm;
  {
    auto comm = create_mpi_world();
    if (!comm) {
      std::fprintf(stderr, "FAIL: %s\n", comm.error().message().c_str());
      return 1;
    }
    check_algorithms(**comm);
    check_shared_and_async(**comm);
    check_cma_types(**comm);
    check_cma_probe(**comm);
    check_registered(**comm);
    check_mismatch(**comm);
    if ((*comm)->rank() == 0) std::printf("%d ranks: %d failure(s)\n", (*comm)->size(), g_failures);
  }
  mpi_finalize();
  return g_failures == 0 ? 0 : 1;
}
