#include "common/rss.h"

#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace dltune::rss {
namespace {

// The "<key>:   <n> kB" line of /proc/self/status, in bytes.
int64_t status_kb(const char* key) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int64_t out = -1;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, n) != 0 || line[n] != ':') continue;
    long long kb = 0;
    if (std::sscanf(line + n + 1, "%lld", &kb) == 1) out = static_cast<int64_t>(kb) * 1024;
    break;
  }
  std::fclose(f);
  return out;
}

// The first integer in `path`; -1 when unreadable or not a number ("max").
int64_t file_int(const char* path) {
  std::FILE* f = std::fopen(path, "r");
  if (!f) return -1;
  long long v = -1;
  if (std::fscanf(f, "%lld", &v) != 1) v = -1;
  std::fclose(f);
  return static_cast<int64_t>(v);
}

}  // namespace

int64_t memory_limit_bytes() {
  int64_t total = -1;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    long long kb = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemTotal: %lld kB", &kb) == 1) {
        total = static_cast<int64_t>(kb) * 1024;
        break;
      }
    std::fclose(f);
  }
  for (const char* p :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t v = file_int(p);
    if (v > 0 && (total <= 0 || v < total)) return v;
  }
  return total > 0 ? total : 0;
}

int64_t current_bytes() { return status_kb("VmRSS"); }
int64_t peak_bytes() { return status_kb("VmHWM"); }
int64_t shmem_bytes() { return status_kb("RssShmem"); }

bool restart_peak() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace dltune::rss
