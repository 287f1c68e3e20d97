#include "comm/shm_lines.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace dltune::comm::shm_lines {
namespace {

// CLDEMOTE lies in the hint-NOP encoding space (CPUs without it execute a NOP), but it is
// issued only where CPUID says the CPU has it, so nothing depends on that.
const bool kHasCldemote = [] {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 25)) != 0;  // CPUID.7.0:ECX.25
#else
  return false;
#endif
}();

inline void demote(uint8_t* p) {
#if defined(__x86_64__)
  asm volatile("cldemote %0" ::"m"(*p));
#else
  (void)p;
#endif
}

}  // namespace

bool has_cldemote() { return kHasCldemote; }

void write(uint8_t* slot, const void* src, size_t bytes, uint64_t tag) {
  const auto* in = static_cast<const uint8_t*>(src);
  const size_t lines = lines_for(bytes);
  const size_t tail = bytes - (lines - 1) * kLineData;  // the last line's data bytes
  for (size_t l = 0; l < lines; ++l) {
    uint8_t* line = slot + l * kLineBytes;
    std::memcpy(line + kTagBytes, in + l * kLineData, l + 1 < lines ? kLineData : tail);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(line))
        .store(tag, std::memory_order_release);
  }
  if (kHasCldemote) {
    for (size_t l = 0; l < lines; ++l) demote(slot + l * kLineBytes);
  }
}

}  // namespace dltune::comm::shm_lines
