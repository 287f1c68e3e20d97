// The cma allreduce beyond the serial-reference sweep of allreduce_test.cc: its probe of
// cross-memory attach, the fallback where the kernel refuses it (forced here by the test hook
// and by DLTUNE_COMM_CMA=off) and the log line that says so once, node-local use only, and a
// failed copy ending in an error on every rank rather than a wrong sum.
//
// The ranks are threads of one process: process_vm_readv/writev on the process's own id is
// the real system call (a thread group may always attach to itself), so the copies run as
// between processes. tests/comm runs the same algorithm between MPI processes.
#include "comm/cma.h"

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "comm/algorithms.h"
#include "comm/allreduce.h"
#include "comm/tests/test_util.h"
#include "comm/thread_communicator.h"

namespace dltune::comm {
namespace {

using testing::make_input;
using testing::reference;

// Runs `calls` cma allreduces of `count` f32 on `ranks` ranks (alternately in place and out of
// place) and checks each against the serial sum; returns every rank's CmaPeers as it saw them.
std::vector<CmaPeers> run_and_check(int ranks, size_t count, int calls, int ranks_per_node = 0) {
  std::vector<CmaPeers> seen(static_cast<size_t>(ranks));
  const auto want = reference<float>(ranks, count, ReduceOp::kSum);
  Status s = spawn(
      ranks,
      [&](Communicator& c) -> Status {
        AllreduceOptions o;
        o.algorithm = ranks_per_node > 0 ? Algorithm::kHierarchical : Algorithm::kCma;
        o.inner = Algorithm::kCma;
        for (int call = 0; call < calls; ++call) {
          auto in = make_input<float>(c.rank(), count);
          std::vector<float> out(count, -1.0f);
          float* recv = call % 2 == 0 ? in.data() : out.data();
          DLTUNE_TRY(allreduce(c, in.data(), recv, count, DataType::kF32, ReduceOp::kSum, o));
          if (!std::equal(want.begin(), want.end(), recv))
            return internal_error("wrong sum in call " + std::to_string(call));
        }
        auto peers = c.local().cma_peers(c.deadline_from_now());  // probed already: no exchange
        DLTUNE_TRY(peers);
        seen[static_cast<size_t>(c.rank())] = **peers;
        return ok_status();
      },
      ranks_per_node);
  EXPECT_TRUE(s.ok()) << s.error().message();
  return seen;
}

// The single-copy path itself (messages of kCmaMinBytes and more; smaller ones take shm's,
// which allreduce_test.cc sweeps) in every type and operation, against the serial reference:
// the threshold, one element more (odd), and a count giving several blocks per slice; in
// place and out of place, aligned and misaligned by one element and by one byte.
template <typename T>
void check_cma_path(int ranks, size_t count, DataType type, ReduceOp op, bool in_place,
                    size_t misalign) {
  const auto want = reference<T>(ranks, count, op);
  std::vector<std::vector<T>> got(static_cast<size_t>(ranks));
  Status s = spawn(ranks, [&](Communicator& c) -> Status {
    testing::Buffer<T> in(count, misalign), out(count, misalign);
    in.fill(make_input<T>(c.rank(), count));
    void* recv = in_place ? in.data() : out.data();
    AllreduceOptions o;
    o.algorithm = Algorithm::kCma;
    DLTUNE_TRY(allreduce(c, in.data(), recv, count, type, op, o));
    if (!in_place && in.read(count) != make_input<T>(c.rank(), count))
      return internal_error("the send buffer was modified");
    got[static_cast<size_t>(c.rank())] = (in_place ? in : out).read(count);
    return ok_status();
  });
  const std::string what = std::to_string(ranks) + " ranks, " + std::to_string(count) + " " +
                           std::string(dtype_name(type)) + " " + std::string(op_name(op)) +
                           (in_place ? " in place" : " out of place") + ", misaligned by " +
                           std::to_string(misalign);
  ASSERT_TRUE(s.ok()) << what << ": " << s.error().message();
  for (int r = 0; r < ranks; ++r) ASSERT_EQ(got[static_cast<size_t>(r)], want) << what;
}

template <typename T>
void check_cma_path_counts(DataType type, ReduceOp op) {
  const size_t at = detail::kCmaMinBytes / sizeof(T);
  // Three blocks and a bit per slice at 2 ranks, a block and a bit at 5.
  const size_t several = 6 * detail::kCmaBlockBytes / sizeof(T) + 7;
  for (int ranks : {2, 3, 5}) {
    for (size_t count : {at, at + 1, several}) {
      for (auto [in_place, misalign] :
           {std::pair{true, size_t{0}}, std::pair{false, sizeof(T)}, std::pair{false, size_t{1}}}) {
        check_cma_path<T>(ranks, count, type, op, in_place, misalign);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(Cma, SingleCopyPathEveryTypeAndOp) {
  check_cma_path_counts<float>(DataType::kF32, ReduceOp::kSum);
  check_cma_path_counts<double>(DataType::kF64, ReduceOp::kSum);
  check_cma_path_counts<int32_t>(DataType::kI32, ReduceOp::kSum);
  check_cma_path_counts<int64_t>(DataType::kI64, ReduceOp::kMax);
  check_cma_path_counts<float>(DataType::kF32, ReduceOp::kMin);
}

struct FaultGuard {
  explicit FaultGuard(std::function<int(int)> f) { cma::set_probe_fault(std::move(f)); }
  ~FaultGuard() { cma::set_probe_fault(nullptr); }
};

TEST(Cma, ProbeFindsEveryLocalRankUsable) {
  FaultGuard guard(nullptr);
  for (int ranks : {2, 3, 4}) {
    for (const CmaPeers& p : run_and_check(ranks, 100003, 2)) {
      EXPECT_TRUE(p.usable) << p.reason;
      EXPECT_EQ(p.pids, std::vector<pid_t>(static_cast<size_t>(ranks), getpid()));
    }
  }
}

// One local rank's probe refused (EPERM, as under Yama or in a container): every rank agrees
// not to use CMA, the sums stay right (shm's staging), and the refusal is logged once, by the
// refusing rank, with its reason, however many calls and ranks there are.
TEST(Cma, RefusedProbeFallsBackAndLogsOnce) {
  FaultGuard guard([](int local_rank) { return local_rank == 1 ? EPERM : 0; });
  ::testing::internal::CaptureStderr();
  std::vector<CmaPeers> seen = run_and_check(3, 70001, 4);
  std::vector<CmaPeers> again = run_and_check(3, 17, 2);  // a second group in this process
  const std::string log = ::testing::internal::GetCapturedStderr();
  for (const auto* group : {&seen, &again}) {
    for (const CmaPeers& p : *group) {
      EXPECT_FALSE(p.usable);
      EXPECT_TRUE(p.pids.empty());
      EXPECT_NE(p.reason.find("local rank 1: process_vm_readv from local rank 0"),
                std::string::npos)
          << p.reason;
      EXPECT_NE(p.reason.find(std::strerror(EPERM)), std::string::npos) << p.reason;
    }
  }
  const std::string line = "cross-memory attach refused (local rank 1:";
  const size_t first = log.find(line);
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(line, first + 1), std::string::npos) << "logged more than once:\n" << log;
  EXPECT_NE(log.find("falls back to staging through node-shared memory"), std::string::npos);
}

// DLTUNE_COMM_CMA=off: no copies between processes, the right sums, the reason says why; a
// value that is neither auto nor off is a clear error naming the variable.
TEST(Cma, TurnedOffByTheEnvironment) {
  FaultGuard guard(nullptr);
  ASSERT_EQ(setenv("DLTUNE_COMM_CMA", "off", 1), 0);
  std::vector<CmaPeers> seen = run_and_check(2, 1 << 16, 2);
  ASSERT_EQ(setenv("DLTUNE_COMM_CMA", "yes", 1), 0);
  Status bad = spawn(2, [&](Communicator& c) -> Status {
    float v = 1;
    AllreduceOptions o;
    o.algorithm = Algorithm::kCma;
    return allreduce(c, &v, &v, 1, DataType::kF32, ReduceOp::kSum, o);
  });
  unsetenv("DLTUNE_COMM_CMA");
  for (const CmaPeers& p : seen) {
    EXPECT_FALSE(p.usable);
    EXPECT_NE(p.reason.find("DLTUNE_COMM_CMA=off"), std::string::npos) << p.reason;
  }
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(bad.error().message().find("DLTUNE_COMM_CMA must be 'auto' or 'off', got 'yes'"),
            std::string::npos)
      << bad.error().message();
}

// Hierarchical with cma inside each node: the sums are right, and each node's probe covered
// exactly that node's ranks (CMA never reaches a rank on another node; cma itself refuses a
// communicator that spans nodes, failure_test.cc).
TEST(Cma, HierarchicalUsesItWithinEachNodeOnly) {
  FaultGuard guard(nullptr);
  for (auto [ranks, per_node] : {std::pair{4, 2}, std::pair{6, 3}, std::pair{5, 2}}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks, " + std::to_string(per_node) + " per node");
    std::vector<CmaPeers> seen = run_and_check(ranks, 70001, 2, per_node);
    for (int r = 0; r < ranks; ++r) {
      const int node_size = std::min(per_node, ranks - r / per_node * per_node);
      const CmaPeers& p = seen[static_cast<size_t>(r)];
      EXPECT_TRUE(p.usable || node_size == 1) << p.reason;
      if (node_size > 1) {
        EXPECT_EQ(p.pids.size(), static_cast<size_t>(node_size)) << "rank " << r;
      }
    }
  }
}

// Rank 1's receive buffer has a read-only first page, in rank 0's slice: rank 0's
// process_vm_writev into it fails (EFAULT). Both ranks must return an error (rank 1's names
// rank 0), none a vector missing a slice.
TEST(Cma, FailedCopyIsAnErrorOnEveryRank) {
  FaultGuard guard(nullptr);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = 2 * (detail::kCmaMinBytes / page + 1);
  const size_t count = pages * page / sizeof(float);  // slice 0: the first half, page-aligned
  std::vector<Status> results(2);
  std::mutex mu;
  Status s = spawn(2, [&](Communicator& c) -> Status {
    void* map =
        mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return errno_error("mmap");
    if (c.rank() == 1) mprotect(map, page, PROT_READ);
    auto in = make_input<float>(c.rank(), count);
    AllreduceOptions o;
    o.algorithm = Algorithm::kCma;
    Status r = allreduce(c, in.data(), map, count, DataType::kF32, ReduceOp::kSum, o);
    munmap(map, pages * page);
    std::lock_guard lock(mu);
    results[static_cast<size_t>(c.rank())] = r;
    return ok_status();
  });
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_FALSE(results[0].ok());
  EXPECT_NE(results[0].error().message().find("process_vm_writev"), std::string::npos)
      << results[0].error().message();
  EXPECT_NE(results[0].error().message().find(std::strerror(EFAULT)), std::string::npos)
      << results[0].error().message();
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].error().kind(), ErrorKind::kPeerFailed) << results[1].error().message();
  EXPECT_NE(results[1].error().message().find("local rank 0"), std::string::npos)
      << results[1].error().message();
}

// Buffers inside node-shared memory (the engine's gradients) work too: cma copies between
// them like any other memory.
TEST(Cma, OnSharedBuffers) {
  FaultGuard guard(nullptr);
  const size_t count = 100003;
  const auto want = reference<float>(3, count, ReduceOp::kSum);
  Status s = spawn(3, [&](Communicator& c) -> Status {
    auto buf = c.alloc_shared(count * sizeof(float));
    DLTUNE_TRY(buf);
    auto in = make_input<float>(c.rank(), count);
    std::copy(in.begin(), in.end(), buf->as<float>());
    AllreduceOptions o;
    o.algorithm = Algorithm::kCma;
    DLTUNE_TRY(allreduce(c, buf->data(), buf->data(), count, DataType::kF32, ReduceOp::kSum, o));
    if (!std::equal(want.begin(), want.end(), buf->as<float>())) return internal_error("wrong sum");
    return ok_status();
  });
  EXPECT_TRUE(s.ok()) << s.error().message();
}

}  // namespace
}  // namespace dltune::comm
