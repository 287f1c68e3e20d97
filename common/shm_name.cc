#include "common/shm_name.h"

#include <dirent.h>
#include <sys/mman.h>

namespace dltune {

std::string shm_segment_name(int pid, uint64_t n) {
  return "/dltune-" + std::to_string(pid) + "-" + std::to_string(n);
}

int remove_shm_segments_of(int pid) {
  const std::string prefix = "dltune-" + std::to_string(pid) + "-";
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return 0;
  int removed = 0;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    if (name.find_first_not_of("0123456789", prefix.size()) != std::string::npos) continue;
    if (shm_unlink(("/" + name).c_str()) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

}  // namespace dltune
