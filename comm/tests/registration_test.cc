// Registered memory (comm/registration.h): the cma allreduce on registered private buffers
// against the serial reference (in place, out of place, misaligned, some ranks registered and
// some not, a buffer spanning no whole page), the system calls it saves, the buffer's contents
// and address kept through registration and deregistration, its pages private again after,
// fork()ed children not sharing them, a buffer freed before deregistering left alone, and
// registration where the kernel refuses cross-memory attach.
//
// The ranks are threads of one process (as cma_test.cc): the memfds are opened through
// /proc/self/fd, as between processes through /proc/PID/fd. tests/comm runs the registered
// allreduce between MPI processes.
#include "comm/registration.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/allreduce.h"
#include "comm/cma.h"
#include "comm/tests/test_util.h"
#include "comm/thread_communicator.h"

namespace dltune::comm {
namespace {

using testing::make_input;
using testing::reference;

constexpr size_t kPage = 4096;

// Whether [p, p + bytes) is mapped in this process (mincore fails with ENOMEM on a hole).
bool mapped(const void* p, size_t bytes) {
  const auto at = reinterpret_cast<uintptr_t>(p) / kPage * kPage;
  std::vector<unsigned char> v((bytes + kPage) / kPage + 1);
  return mincore(reinterpret_cast<void*>(at), bytes, v.data()) == 0;
}

// Whether /proc/self/maps shows a memfd of registered memory covering address p.
bool shared_at(const void* p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto at = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || at < lo || at >= hi) continue;
    return line.find("/memfd:dltune-reg-") != std::string::npos;
  }
  return false;
}

struct Case {
  int ranks;
  size_t count;
  size_t misalign;  // bytes from a 64-byte boundary
  bool in_place;
  bool all_register;  // false: odd local ranks leave their buffers unregistered
};

// Runs `calls` cma allreduces per case on registered buffers and checks them against the
// serial sum; returns the bytes the kernel copied.
uint64_t run_case(const Case& k, int calls = 3, Algorithm algo = Algorithm::kCma) {
  const auto want = reference<float>(k.ranks, k.count, ReduceOp::kSum);
  const uint64_t before = cma::copied_bytes();
  Status s = spawn(k.ranks, [&](Communicator& c) -> Status {
    testing::Buffer<float> in(k.count, k.misalign), out(k.count, k.misalign);
    in.fill(make_input<float>(c.rank(), k.count));
    const bool reg = k.all_register || c.rank() % 2 == 0;
    auto rin = c.register_memory(in.data(), reg ? k.count * 4 : 0);
    DLTUNE_TRY(rin);
    auto rout = c.register_memory(out.data(), reg && !k.in_place ? k.count * 4 : 0);
    DLTUNE_TRY(rout);
    if (!rin->active()) return internal_error("not active: " + rin->reason());
    if (in.read(k.count) != make_input<float>(c.rank(), k.count))
      return internal_error("registration changed the buffer's contents");
    AllreduceOptions o;
    o.algorithm = algo;
    for (int call = 0; call < calls; ++call) {
      in.fill(make_input<float>(c.rank(), k.count));
      void* recv = k.in_place ? in.data() : out.data();
      DLTUNE_TRY(allreduce(c, in.data(), recv, k.count, DataType::kF32, ReduceOp::kSum, o));
      if ((k.in_place ? in : out).read(k.count) != want)
        return internal_error("wrong sum in call " + std::to_string(call));
      if (!k.in_place && in.read(k.count) != make_input<float>(c.rank(), k.count))
        return internal_error("the send buffer was modified");
    }
    return ok_status();
  });
  EXPECT_TRUE(s.ok()) << s.error().message();
  return cma::copied_bytes() - before;
}

TEST(Registration, RegisteredBuffersReduceCorrectly) {
  // Several blocks per slice, an odd count, misaligned by an element and by a byte.
  for (const Case& k : {Case{2, 300001, 0, true, true}, Case{2, 300001, 4, false, true},
                        Case{3, 123457, 1, true, true}, Case{3, 123457, 0, false, true},
                        Case{2, 300001, 4, true, false}, Case{3, 200003, 0, false, false}}) {
    SCOPED_TRACE("ranks " + std::to_string(k.ranks) + " count " + std::to_string(k.count) +
                 " misalign " + std::to_string(k.misalign) + (k.in_place ? " in" : " out of") +
                 " place" + (k.all_register ? "" : ", some ranks unregistered"));
    run_case(k);
  }
}

TEST(Registration, SavesTheKernelsCopies) {
  // 4 MiB on 2 ranks: unregistered, the kernel copies about the whole vector per call; all
  // registered, only the slices' ends in the buffers' partial pages.
  const size_t count = size_t{1} << 20;
  const uint64_t plain = [&] {
    const auto want = reference<float>(2, count, ReduceOp::kSum);
    const uint64_t before = cma::copied_bytes();
    Status s = spawn(2, [&](Communicator& c) -> Status {
      auto in = make_input<float>(c.rank(), count);
      AllreduceOptions o;
      o.algorithm = Algorithm::kCma;
      DLTUNE_TRY(allreduce(c, in.data(), in.data(), count, DataType::kF32, ReduceOp::kSum, o));
      return in == want ? ok_status() : internal_error("wrong sum");
    });
    EXPECT_TRUE(s.ok()) << s.error().message();
    return cma::copied_bytes() - before;
  }();
  EXPECT_GE(plain, count * 4);  // each rank reads its peer's half and writes it back
  const uint64_t registered = run_case({2, count, 4, true, true}, 1);
  EXPECT_LE(registered, 4 * 2 * kPage) << "the kernel still copied " << registered << " bytes";
}

// 'shm' on registered buffers reduces them in place as 'cma' does (the engine's gradients
// where /dev/shm was short), not through its staging segment.
TEST(Registration, ShmReducesThemInPlace) {
  const uint64_t copied = run_case({2, size_t{1} << 20, 4, true, true}, 1, Algorithm::kShm);
  EXPECT_LE(copied, 4 * 2 * kPage) << "the kernel copied " << copied << " bytes";
  EXPECT_GT(copied, 0u) << "the partial end pages went through the kernel's copies";
}

TEST(Registration, KeepsTheBufferAndGivesItsPagesBack) {
  const size_t count = 100000;  // 400 KB: whole pages inside, partial ones at the ends
  std::vector<std::vector<float>> bufs(2);
  std::vector<Registration> regs(2);
  Status s = spawn(2, [&](Communicator& c) -> Status {
    auto& b = bufs[static_cast<size_t>(c.rank())];
    b = make_input<float>(c.rank(), count);
    auto r = c.register_memory(b.data(), count * 4);
    DLTUNE_TRY(r);
    regs[static_cast<size_t>(c.rank())] = std::move(*r);
    return ok_status();
  });
  ASSERT_TRUE(s.ok()) << s.error().message();
  for (int k = 0; k < 2; ++k) {
    const auto& r = regs[static_cast<size_t>(k)];
    auto& b = bufs[static_cast<size_t>(k)];
    ASSERT_TRUE(r.active());
    const auto at = reinterpret_cast<uintptr_t>(b.data());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r.shared_begin()), (at + kPage - 1) / kPage * kPage);
    EXPECT_EQ(r.shared_bytes(),
              (at + count * 4) / kPage * kPage - (at + kPage - 1) / kPage * kPage);
    EXPECT_TRUE(shared_at(r.shared_begin()));
    EXPECT_EQ(b, make_input<float>(k, count));
    b[count / 2] = 42.0f;  // the program writes it as before
  }
  // A fork()ed child has no mapping at the registered pages (MADV_DONTFORK), and the rest of
  // the buffer as before.
  const void* page = regs[0].shared_begin();
  const pid_t child = fork();
  if (child == 0) _exit(mapped(page, kPage) ? 1 : mapped(bufs[0].data(), 4) ? 0 : 2);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  for (int k = 0; k < 2; ++k) {
    void* shared = regs[static_cast<size_t>(k)].shared_begin();
    regs[static_cast<size_t>(k)].reset();
    auto want = make_input<float>(k, count);
    want[count / 2] = 42.0f;
    EXPECT_EQ(bufs[static_cast<size_t>(k)], want) << "rank " << k;
    EXPECT_FALSE(shared_at(shared)) << "rank " << k << "'s pages are still shared";
  }
}

TEST(Registration, AFreedBufferIsLeftAlone) {
  const size_t bytes = 16 * kPage;
  std::vector<void*> maps(2);
  std::vector<Registration> regs(2);
  Status s = spawn(2, [&](Communicator& c) -> Status {
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return io_error("mmap");
    maps[static_cast<size_t>(c.rank())] = m;
    auto r = c.register_memory(m, bytes);
    DLTUNE_TRY(r);
    regs[static_cast<size_t>(c.rank())] = std::move(*r);
    return ok_status();
  });
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(regs[0].shared_bytes(), bytes);
  ASSERT_EQ(munmap(maps[0], bytes), 0);  // freed while registered
  regs[0].reset();                       // says so in the log, maps nothing there
  EXPECT_FALSE(mapped(maps[0], bytes));
  regs[1].reset();
  EXPECT_TRUE(mapped(maps[1], bytes));
  EXPECT_FALSE(shared_at(maps[1]));
  munmap(maps[1], bytes);
}

TEST(Registration, ABufferWithNoWholePage) {
  // 100 floats: nothing to share; the allreduce is still right (through the kernel).
  Status s = spawn(2, [&](Communicator& c) -> Status {
    testing::Buffer<float> in(100, 4);
    auto r = c.register_memory(in.data(), 400);
    DLTUNE_TRY(r);
    if (!r->active() || r->shared_bytes() != 0) return internal_error("expected nothing shared");
    return ok_status();
  });
  EXPECT_TRUE(s.ok()) << s.error().message();
  run_case({2, 40000, 0, true, true});  // 160 KB: at kCmaMinBytes, mostly whole pages
}

TEST(Registration, WhereTheKernelRefusesCmaItSaysWhy) {
  cma::set_probe_fault([](int) { return EPERM; });
  const size_t count = 200000;
  const auto want = reference<float>(2, count, ReduceOp::kSum);
  Status s = spawn(2, [&](Communicator& c) -> Status {
    auto in = make_input<float>(c.rank(), count);
    auto r = c.register_memory(in.data(), count * 4);
    DLTUNE_TRY(r);
    if (r->active()) return internal_error("registered although the probe was refused");
    if (r->reason().find("refused") == std::string::npos)
      return internal_error("reason: " + r->reason());
    if (shared_at(in.data() + count / 2)) return internal_error("the pages were shared");
    AllreduceOptions o;
    o.algorithm = Algorithm::kCma;
    DLTUNE_TRY(allreduce(c, in.data(), in.data(), count, DataType::kF32, ReduceOp::kSum, o));
    return in == want ? ok_status() : internal_error("wrong sum");
  });
  cma::set_probe_fault(nullptr);
  EXPECT_TRUE(s.ok()) << s.error().message();
}

TEST(Registration, NullBufferIsInvalid) {
  Status s = spawn(1, [&](Communicator& c) -> Status {
    auto r = c.register_memory(nullptr, 8);
    if (r) return internal_error("a null buffer was registered");
    return r.error().kind() == ErrorKind::kInvalidInput ? ok_status() : Status(r.error());
  });
  EXPECT_TRUE(s.ok()) << s.error().message();
}

}  // namespace
}  // namespace dltune::comm
