// comm::keep_freed_memory(): a freed large block is reused without page faults. Its own test
// program, because the setting lasts for the whole process.
#include "comm/process_memory.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>
#include <sys/resource.h>

namespace dltune::comm {
namespace {

uint64_t minor_faults() {
  struct rusage u {};
  EXPECT_EQ(getrusage(RUSAGE_SELF, &u), 0);
  return static_cast<uint64_t>(u.ru_minflt);
}

// Faults taken by a malloc + write + free of `bytes`, after one such round has run before.
uint64_t faults_of_second_round(size_t bytes) {
  auto round = [bytes] {
    char* p = static_cast<char*>(std::malloc(bytes));
    EXPECT_NE(p, nullptr);
    std::memset(p, 1, bytes);
    asm volatile("" : : "r"(p) : "memory");  // keep the writes
    std::free(p);
  };
  round();
  const uint64_t f0 = minor_faults();
  round();
  return minor_faults() - f0;
}

TEST(ProcessMemory, FreedLargeBlocksAreReusedWithoutPageFaults) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer replaces malloc; the setting is glibc's";
#endif
  constexpr size_t kBytes = size_t{64} << 20;  // above glibc's largest mmap threshold
  constexpr uint64_t kPages = kBytes / 4096;
  // The default first (the control): every round maps the block afresh.
  EXPECT_GT(faults_of_second_round(kBytes), kPages / 2);
  ASSERT_TRUE(keep_freed_memory());
  faults_of_second_round(kBytes);  // the heap grows once
  EXPECT_LT(faults_of_second_round(kBytes), kPages / 64);
}

}  // namespace
}  // namespace dltune::comm
