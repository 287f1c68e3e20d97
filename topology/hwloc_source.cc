// The two topology sources: live hwloc discovery and hwloc XML exports. Bad XML is sorted into
// the cases a user can act on before hwloc sees it, because hwloc itself only says EINVAL.
#include "topology/hwloc_source.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#if defined(__SANITIZE_ADDRESS__)
#define DLTUNE_TOPO_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DLTUNE_TOPO_LSAN 1
#endif
#endif
#ifdef DLTUNE_TOPO_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#include "common/env.h"
#include "common/log.h"
#include "common/paths.h"
#include "topology/live_cache.h"
#include "topology/xml_check.h"

namespace dltune::topology {
namespace detail {
namespace {

#ifdef DLTUNE_TOPO_LSAN
struct LeakCheckPause {
  LeakCheckPause() { __lsan_disable(); }
  ~LeakCheckPause() { __lsan_enable(); }
};
#else
struct LeakCheckPause {
  LeakCheckPause() {}  // user-provided: an RAII guard, not an unused variable
};
#endif

// The hwloc plugin dltune has no use for, kept from loading: hwloc_gl finds X11 displays
// through NV-CONTROL, which a compute node has none of and dltune would not read, and loading it
// pulls in libX11, libXext, libxcb and more. hwloc dlopens every plugin it finds the first time a
// process creates a topology; this one cost ~10 ms of the launcher's ~45 ms start-up here.
// (hwloc_xml_libxml costs ~4 ms more but stays: hwloc's built-in XML reader accepts malformed
// exports that libxml2 rejects.)
constexpr const char* kUnusedPlugins = "hwloc_gl";

// hwloc_topology_init, with kUnusedPlugins blacklisted unless the user set
// HWLOC_PLUGINS_BLACKLIST. hwloc reads that variable only while it loads its plugins (the
// first init of a process, or the first after every topology was destroyed); it is unset again
// at once so that programs dltune starts inherit the user's environment, not dltune's.
int init_topology(hwloc_topology_t* raw) {
  static constexpr const char* kVar = "HWLOC_PLUGINS_BLACKLIST";
  if (std::getenv(kVar) != nullptr) return hwloc_topology_init(raw);
  setenv(kVar, kUnusedPlugins, 0);
  const int rc = hwloc_topology_init(raw);
  const int saved = errno;
  unsetenv(kVar);
  errno = saved;
  return rc;
}

// A fresh handle with the I/O filter set: without it hwloc drops every bridge, PCI device and
// OS device (so every GPU and NIC) while loading.
Result<HwlocTopology> new_handle() {
  hwloc_topology_t raw = nullptr;
  if (init_topology(&raw) != 0) return errno_error("hwloc_topology_init failed");
  HwlocTopology t(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  return t;
}

// Loads the XML export in `xml` into `t` (fresh from new_handle()) with hwloc topology
// `flags`. False when hwloc rejects the text.
bool load_xml_buffer(hwloc_topology_t t, const std::string& xml, unsigned long flags) {
  // size includes the terminating NUL, as hwloc's own XML export buffers do.
  return hwloc_topology_set_xmlbuffer(t, xml.c_str(), static_cast<int>(xml.size() + 1)) == 0 &&
         hwloc_topology_set_flags(t, flags) == 0 && hwloc_topology_load(t) == 0;
}

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  return i;
}

// The value of the version attribute of <topology ...>, "" when there is none.
std::string topology_version(std::string_view xml) {
  const size_t tag = xml.find("<topology");
  if (tag == std::string_view::npos) return "";
  const size_t end = xml.find('>', tag);
  const std::string_view head = xml.substr(tag, end == std::string_view::npos ? 200 : end - tag);
  const size_t v = head.find("version=");
  if (v == std::string_view::npos || v + 9 >= head.size()) return "";
  const char quote = head[v + 8];
  const size_t close = head.find(quote, v + 9);
  if (close == std::string_view::npos) return "";
  return std::string(head.substr(v + 9, close - v - 9));
}

// Classifies text hwloc would reject with a bare EINVAL. ok_status() when it looks loadable.
Status precheck_xml(const std::string& xml, const std::string& path) {
  const std::string where = "'" + path + "'";
  std::string_view s(xml);
  if (s.size() >= 3 && s.substr(0, 3) == "\xEF\xBB\xBF") s.remove_prefix(3);  // UTF-8 BOM
  const size_t first = skip_space(s, 0);
  if (first == s.size()) {
    return invalid_input(where + " is empty: give an hwloc XML export such as `lstopo " +
                         "--of xml` writes");
  }
  if (s[first] != '<') {
    return invalid_input(where + " is not an XML file: give an hwloc XML export such as " +
                         "`lstopo --of xml` writes");
  }
  if (s.find("<topology") == std::string_view::npos) {
    return invalid_input(where + " is XML but not an hwloc topology export (no <topology> " +
                         "element)");
  }
  const std::string version = topology_version(s);
  if (!version.empty() && version[0] >= '3') {
    return invalid_input(where + " is an hwloc " + version + " export, which hwloc 2 (used " +
                         "by this dltune) cannot read: export it again with hwloc 2's lstopo");
  }
  if (s.find("</topology>") == std::string_view::npos) {
    return invalid_input(where + " is truncated: it ends before </topology>");
  }
  if (s.find("<object") == std::string_view::npos) {
    return invalid_input(where + " describes an empty topology (no <object> element): export " +
                         "a whole machine with `lstopo --of xml`");
  }
  return ok_status();
}

}  // namespace

Result<HwlocTopology> open_live() {
  auto t = new_handle();
  if (!t) return std::move(t).error();
  int rc = 0;
  {
    // hwloc's PCI plugin (libpciaccess, dlopen'ed and unloaded again) leaks about 1 KB per
    // live discovery; under LeakSanitizer that would fail every test and CLI run that
    // discovers the machine, so leak checking pauses for this one call.
    LeakCheckPause pause;
    rc = hwloc_topology_load(t->get());
  }
  if (rc != 0) return errno_error("hwloc could not discover this machine");
  return t;
}

Result<HwlocTopology> open_xml_text(const std::string& xml, const std::string& path) {
  DLTUNE_TRY(precheck_xml(xml, path));
  // hwloc trusts its input (a missing complete_cpuset crashes it): nothing reaches it unchecked.
  DLTUNE_TRY(check_hwloc_xml(xml, path));
  // hwloc prints its own "aborting!" lines for some bad exports; the error returned below
  // already says it in one sentence. HWLOC_HIDE_ERRORS is read once per process; a value the
  // user set is kept.
  setenv("HWLOC_HIDE_ERRORS", "2", 0);
  auto t = new_handle();
  if (!t) return std::move(t).error();
  if (!load_xml_buffer(t->get(), xml, 0)) {
    return invalid_input("'" + path + "' is not a valid hwloc XML export (hwloc rejected it: " +
                         "malformed, or no PU or NUMA node): export it again with `lstopo " +
                         "--of xml`");
  }
  return t;
}

Result<HwlocTopology> open_export_of_this_system(const std::string& xml) {
  // The saved export sits in a directory the user owns: it is input like any other.
  DLTUNE_TRY(check_hwloc_xml(xml, "the saved export of this machine"));
  auto t = new_handle();
  if (!t) return std::move(t).error();
  if (!load_xml_buffer(t->get(), xml, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM)) {
    return invalid_input("hwloc rejected the saved export of this machine");
  }
  return t;
}

Result<std::string> export_xml(hwloc_topology_t t) {
  char* buf = nullptr;
  int len = 0;
  if (hwloc_topology_export_xmlbuffer(t, &buf, &len, 0) != 0 || buf == nullptr) {
    return errno_error("hwloc could not export the topology as XML");
  }
  std::string xml(buf, len > 0 ? static_cast<size_t>(len - 1) : 0);  // len counts the NUL
  hwloc_free_xmlbuffer(t, buf);
  return xml;
}

}  // namespace detail

Result<Topology> discover() {
  auto t = detail::open_live_cached(detail::cache_dir());
  if (!t) return std::move(t).error();
  return detail::build_model(t->get(), "live", true);
}

Result<LiveDiscovery> discover_keeping_hwloc() {
  auto t = detail::open_live_cached(detail::cache_dir());
  if (!t) return std::move(t).error();
  auto model = detail::build_model(t->get(), "live", true);
  if (!model) return std::move(model).error();
  return LiveDiscovery{std::move(*model),
                       std::shared_ptr<hwloc_topology>(t->release(), detail::HwlocDeleter{})};
}

Result<Topology> load_xml(const std::string& path) {
  if (path.empty()) return invalid_input("no topology file given (empty path)");
  if (!paths::exists(path)) {
    return not_found("topology file '" + path + "' does not exist");
  }
  auto text = paths::read_file(path);
  // An unreadable topology file (a directory, no permission) is bad input, not a failure.
  if (!text) return invalid_input(text.error().message());
  auto t = detail::open_xml_text(*text, path);
  if (!t) return std::move(t).error();
  DLTUNE_LOG(kDebug, "topo") << "loaded hwloc XML '" << path << "' (" << text->size() << " bytes)";
  return detail::build_model(t->get(), path, false);
}

Result<Topology> load_xml_text(const std::string& xml, const std::string& source) {
  auto t = detail::open_xml_text(xml, source);
  if (!t) return std::move(t).error();
  return detail::build_model(t->get(), source, false);
}

Result<std::string> export_default_xml() {
  if (auto xml = env::get_if_set(env::kTopoXml)) {
    auto topo = load_xml(*xml);  // the same checks as every reader's
    if (!topo) return std::move(topo).error().wrap(std::string(env::kTopoXml.name));
    return paths::read_file(*xml);
  }
  auto t = detail::open_live_cached(detail::cache_dir());
  if (!t) return std::move(t).error();
  return detail::export_xml(t->get());
}

Result<LiveDiscovery> discover_default_keeping_hwloc() {
  if (!env::get_if_set(env::kTopoXml)) return discover_keeping_hwloc();
  auto topo = discover_default();
  if (!topo) return std::move(topo).error();
  return LiveDiscovery{std::move(*topo), nullptr};
}

Result<Topology> discover_default() {
  if (auto xml = env::get_if_set(env::kTopoXml)) {
    auto topo = load_xml(*xml);
    if (!topo) return std::move(topo).error().wrap(std::string(env::kTopoXml.name));
    return topo;
  }
  return discover();
}

}  // namespace dltune::topology
