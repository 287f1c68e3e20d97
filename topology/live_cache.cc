// This boot's hwloc export of the live machine (live_cache.h says when it is used).
#include "topology/live_cache.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string_view>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "common/env.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/paths.h"

extern char** environ;

namespace dltune::topology::detail {
namespace {

// Bump when the export's use changes (what new_handle() filters, what build_model() reads).
constexpr std::string_view kFormat = "dltune live-topology cache 1";

// A small procfs or sysfs file, trailing newlines dropped; "?" when it cannot be read.
std::string small_file(const std::string& path) {
  auto text = paths::read_file(path);
  if (!text) return "?";
  while (!text->empty() && text->back() == '\n') text->pop_back();
  return *text;
}

std::string link_target(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path target = std::filesystem::read_symlink(path, ec);
  return ec ? "?" : target.string();
}

// The names in a directory, sorted; none when it cannot be read.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The lines of /proc/self/status and /proc/meminfo whose key is one of `keys`.
void add_lines(std::string& sig, const std::string& path,
               std::initializer_list<std::string_view> keys) {
  const std::string text = small_file(path);
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + at, end - at);
    for (std::string_view k : keys) {
      if (line.size() > k.size() && line.substr(0, k.size()) == k && line[k.size()] == ':') {
        sig.append(line).push_back('\n');
      }
    }
    at = end + 1;
  }
}

// True when an HWLOC_* variable that can change what hwloc discovers is set. HWLOC_HIDE_ERRORS
// changes only hwloc's messages (and load_xml() sets it).
bool hwloc_variable_set() {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "HWLOC_", 6) == 0 && std::strncmp(*e, "HWLOC_HIDE_ERRORS=", 18) != 0) {
      return true;
    }
  }
  return false;
}

// True when `dir` exists as a directory owned by this user with no group or other access,
// creating it (mode 0700) when it does not exist.
bool private_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return false;
  return S_ISDIR(st.st_mode) && st.st_uid == ::getuid() && (st.st_mode & 077) == 0;
}

// Removes the exports an earlier boot left in `dir` (they can never match again): files named
// topology-*.xml last written before this boot.
void remove_earlier_boots(const std::string& dir) {
  const double uptime_s = std::atof(small_file("/proc/uptime").c_str());
  if (uptime_s <= 0) return;
  const double boot = static_cast<double>(::time(nullptr)) - uptime_s;
  for (const std::string& name : entries(dir)) {
    if (name.rfind("topology-", 0) != 0) continue;
    const std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && static_cast<double>(st.st_mtime) < boot - 60) {
      ::unlink(path.c_str());
    }
  }
}

}  // namespace

std::string live_signature() {
  std::string sig(kFormat);
  sig += "\nhwloc api " + std::to_string(hwloc_get_api_version());
  sig += "\nboot " + small_file("/proc/sys/kernel/random/boot_id");
  sig += "\ncpus online " + small_file("/sys/devices/system/cpu/online");
  sig += "\nnodes online " + small_file("/sys/devices/system/node/online");
  sig += "\ncgroup " + small_file("/proc/self/cgroup") + "\n";
  add_lines(sig, "/proc/self/status", {"Cpus_allowed_list", "Mems_allowed_list"});
  add_lines(sig, "/proc/meminfo", {"MemTotal", "HugePages_Total", "Hugepagesize"});
  const std::string nodes = "/sys/devices/system/node/";
  for (const std::string& n : entries(nodes)) {
    if (n.rfind("node", 0) != 0) continue;
    std::string meminfo = small_file(nodes + n + "/meminfo");
    sig += n + " " + meminfo.substr(0, meminfo.find('\n')) + "\n";
  }
  const std::string pci = "/sys/bus/pci/devices/";
  for (const std::string& d : entries(pci)) {
    sig += "pci " + d + " " + link_target(pci + d);
    for (const char* attr : {"class", "vendor", "device", "subsystem_vendor", "subsystem_device"}) {
      sig += " " + small_file(pci + d + "/" + attr);
    }
    sig += "\n";
  }
  for (const char* cls : {"net", "infiniband", "drm", "dma"}) {
    const std::string dir = std::string("/sys/class/") + cls + "/";
    for (const std::string& d : entries(dir)) {
      sig += std::string(cls) + " " + d + " " + link_target(dir + d) + "\n";
    }
  }
  return sig;
}

std::string cache_dir() {
  const std::string setting = env::get(env::kTopoCache);
  if (setting == "0") return "";
  if (hwloc_variable_set()) return "";
  const auto runtime = paths::runtime_dir();
  const std::string dir =
      runtime ? *runtime + "/dltune" : "/tmp/dltune-" + std::to_string(::getuid());
  return private_dir(dir) ? dir : "";
}

Result<HwlocTopology> open_live_cached(const std::string& dir, bool* from_cache) {
  if (from_cache != nullptr) *from_cache = false;
  if (dir.empty()) return open_live();
  const std::string path = dir + "/topology-" + sha256_hex(live_signature()).substr(0, 32) + ".xml";
  if (auto xml = paths::read_file(path)) {
    if (auto t = open_export_of_this_system(*xml)) {
      if (from_cache != nullptr) *from_cache = true;
      DLTUNE_LOG(kDebug, "topo") << "this boot's saved discovery: " << path;
      return t;
    }
    DLTUNE_LOG(kDebug, "topo") << "ignoring '" << path << "': hwloc rejected it";
  }
  auto t = open_live();
  if (!t) return t;
  auto xml = export_xml(t->get());
  const Status saved = xml ? paths::write_file_atomic(path, *xml) : Status(xml.error());
  if (!saved.ok()) {
    DLTUNE_LOG(kDebug, "topo") << "discovery not saved for the next command: "
                               << saved.error().message();
  }
  remove_earlier_boots(dir);
  return t;
}

}  // namespace dltune::topology::detail
