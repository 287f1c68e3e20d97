// This process's resident memory, from /proc/self/status (Linux): the current resident set and
// its high-water mark, and a way to restart the mark, so a program can measure the peak of one
// phase (a training run) above what it held before (libraries, the data set).
#pragma once

#include <cstdint>

namespace dltune::rss {

// VmRSS in bytes; -1 when /proc/self/status cannot be read.
int64_t current_bytes();
// RssShmem in bytes: resident pages of shared memory mappings (/dev/shm segments), which count
// in VmRSS and VmHWM; -1 when unreadable.
int64_t shmem_bytes();
// VmHWM in bytes (the peak since start or since the last restart_peak()); -1 when unreadable.
int64_t peak_bytes();
// Restarts the high-water mark at the current resident set (writes 5 to /proc/self/clear_refs).
// Returns false where the kernel refused (then peak_bytes() stays the process's whole peak).
bool restart_peak();

// The memory this process may use: its cgroup's limit (cgroup v2 memory.max, v1
// memory.limit_in_bytes) when set and below the machine's, else MemTotal of /proc/meminfo;
// bytes. 0 when neither can be read.
int64_t memory_limit_bytes();

}  // namespace dltune::rss
