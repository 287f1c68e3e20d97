#include "comm/process_memory.h"

#include <climits>

#include <malloc.h>

namespace dltune::comm {

bool keep_freed_memory() {
  // No mmap'd blocks at all: a threshold cannot be raised past 32 MiB, and messages are
  // larger. Blocks a thread arena cannot hold fall back to the main heap.
  const bool mmap_off = mallopt(M_MMAP_MAX, 0) == 1;
  // Never shrink the heap on free (INT_MAX is mallopt's largest value: 2 GiB above the top).
  const bool trim_off = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  return mmap_off && trim_off;
}

}  // namespace dltune::comm
