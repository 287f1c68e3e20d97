// The names of dltune's POSIX shared-memory segments: "/dltune-<pid>-<n>" (in /dev/shm),
// <pid> the creating process's, <n> its count of segments. One format for the ranks that make
// them (comm/shm_segment.cc: a segment is unlinked once every local rank has mapped it) and
// for the launcher, which removes what a rank killed before that left behind.
#pragma once

#include <cstdint>
#include <string>

namespace dltune {

// "/dltune-<pid>-<n>": the name shm_open() takes.
std::string shm_segment_name(int pid, uint64_t n);

// Removes the segments "/dltune-<pid>-*" of a process that has ended (the launcher's own child:
// its pid cannot be another live process's until it is reaped, and is not reused at once).
// Returns how many it removed; errors (no /dev/shm, a name already gone) are ignored.
int remove_shm_segments_of(int pid);

}  // namespace dltune
