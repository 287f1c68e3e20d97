#include "topology/xml_check.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace dltune::topology {
namespace {

// An hwloc bitmap: 32-bit words, lowest first, and whether every bit above them is set
// (the "0xf...f," prefix).
struct Bitmap {
  std::vector<uint32_t> words;
  bool infinite = false;

  bool test(uint64_t bit) const {
    const uint64_t w = bit / 32;
    if (w >= words.size()) return infinite;
    return (words[w] >> (bit % 32)) & 1;
  }
  // True when every bit of this one is set in `o`.
  bool within(const Bitmap& o) const {
    if (infinite && !o.infinite) return false;
    const size_t n = std::max(words.size(), o.words.size());
    for (size_t i = 0; i < n; ++i) {
      const uint32_t a = i < words.size() ? words[i] : (infinite ? ~0u : 0u);
      const uint32_t b = i < o.words.size() ? o.words[i] : (o.infinite ? ~0u : 0u);
      if ((a & ~b) != 0) return false;
    }
    return true;
  }
  int count_up_to(int limit) const {
    if (infinite) return limit;
    int n = 0;
    for (uint32_t w : words) n += __builtin_popcount(w);
    return std::min(n, limit);
  }
};

// hwloc_bitmap_sscanf's format, strictly: comma-separated words of 1 to 8 hex digits after
// "0x" (an empty word is 0), most significant first, optionally after "0xf...f". The string
// must not start with a comma: hwloc counts its words from the second character, and one
// word too many fails an assert() in hwloc 2.9 (found by fuzzing: cpuset=",0x1").
std::optional<Bitmap> parse_bitmap(std::string_view s, size_t max_words) {
  Bitmap b;
  if (s.starts_with(',')) return std::nullopt;
  if (s.starts_with("0xf...f")) {
    b.infinite = true;
    s.remove_prefix(7);
    if (s.empty()) return b;
    if (s[0] != ',') return std::nullopt;
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  std::vector<uint32_t> msb_first;
  while (true) {
    const size_t comma = s.find(',');
    const std::string_view w = s.substr(0, comma);
    uint32_t v = 0;
    if (!w.empty()) {
      if (w.size() < 3 || w.size() > 10 || w[0] != '0' || w[1] != 'x') return std::nullopt;
      for (char c : w.substr(2)) {
        const int d = (c >= '0' && c <= '9')   ? c - '0'
                      : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                      : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                               : -1;
        if (d < 0) return std::nullopt;
        v = (v << 4) | static_cast<uint32_t>(d);
      }
    }
    msb_first.push_back(v);
    if (msb_first.size() > max_words) return std::nullopt;
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  b.words.assign(msb_first.rbegin(), msb_first.rend());
  return b;
}

std::optional<uint32_t> parse_index(const std::string& s) {
  if (s.empty() || s.size() > 10) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(v);
}

enum class Side { kCpu, kIo };

// hwloc 2 type names, and the hwloc 1 ones it still reads.
std::optional<Side> object_side(const std::string& type) {
  static constexpr std::array<std::string_view, 19> kCpu = {
      "Machine", "System",   "Package",  "Socket",   "Die",     "Group",   "Core",
      "PU",      "NUMANode", "MemCache", "L1Cache",  "L2Cache", "L3Cache", "L4Cache",
      "L5Cache", "L1iCache", "L2iCache", "L3iCache", "Cache"};
  static constexpr std::array<std::string_view, 4> kIoTypes = {"Bridge", "PCIDev", "OSDev", "Misc"};
  if (std::find(kCpu.begin(), kCpu.end(), type) != kCpu.end()) return Side::kCpu;
  if (std::find(kIoTypes.begin(), kIoTypes.end(), type) != kIoTypes.end()) return Side::kIo;
  return std::nullopt;
}

constexpr const char* kSetNames[4] = {"cpuset", "complete_cpuset", "nodeset", "complete_nodeset"};

// One open element of the document.
struct Open {
  enum Kind { kTopology, kObject, kOther } kind = kOther;
  Side side = Side::kCpu;
  std::array<Bitmap, 4> sets;  // kSetNames order; meaningful for kCpu objects
};

class Checker {
 public:
  explicit Checker(const XmlLimits& limits) : limits_(limits) {}

  // Checks one start tag against the open elements; "" when it is fine.
  std::string start(const XmlEvent& e) {
    // The elements hwloc 2.9 reads (and hwloc 1.x's distances/latency); hwloc fails on others
    // (found by fuzzing), namespaced names included.
    static constexpr std::array<std::string_view, 16> kElements = {
        "topology",         "object",    "info",          "page_type",
        "userdata",         "distances", "latency",       "distances2",
        "distances2hetero", "indexes",   "u64values",     "support",
        "cpukind",          "memattr",   "memattr_value", "root"};
    if (std::find(kElements.begin(), kElements.end(), e.name) == kElements.end()) {
      return "unknown element <" + e.name.substr(0, 40) + ">";
    }
    if (std::string m = other_bitmaps(e); !m.empty()) return m;
    Open o;
    if (stack_.empty()) {
      if (e.name != "topology") return "the document element is <" + e.name + ">, not <topology>";
      o.kind = Open::kTopology;
    } else if (e.name == "object") {
      o.kind = Open::kObject;
      if (std::string m = object(e, &o); !m.empty()) return m;
    }
    stack_.push_back(std::move(o));
    return "";
  }
  void end() { stack_.pop_back(); }
  bool has_root() const { return roots_ == 1; }

 private:
  // The bitmaps hwloc 2.9 reads outside <object>: a CPU kind's cpuset and a memory
  // attribute value's initiator_cpuset. Only their form is checked; hwloc ignores ones that
  // name no PU.
  std::string other_bitmaps(const XmlEvent& e) const {
    const char* attr = e.name == "cpukind"         ? "cpuset"
                       : e.name == "memattr_value" ? "initiator_cpuset"
                                                   : nullptr;
    if (attr == nullptr) return "";
    const std::string* v = e.attribute(attr);
    if (v == nullptr || parse_bitmap(*v, max_words()).has_value()) return "";
    return "<" + e.name + "> has " + attr + " \"" + v->substr(0, 40) +
           "\", not an hwloc bitmap such as 0x000000ff,0xffffffff";
  }
  size_t max_words() const { return (limits_.max_value_bytes / 11) + 1; }

  std::string object(const XmlEvent& e, Open* o) {
    const Open& parent = stack_.back();
    if (parent.kind == Open::kOther) return "an <object> inside another element than <object>";
    const std::string* type = e.attribute("type");
    if (type == nullptr) return "an object without a type attribute";
    const auto side = object_side(*type);
    if (!side) return "unknown object type '" + type->substr(0, 40) + "'";
    o->side = *side;
    const std::string what = "the " + *type + " object";
    if (parent.kind == Open::kTopology) {
      if (++roots_ > 1) return "a second root object (" + *type + ")";
      if (*type != "Machine" && *type != "System") return "the root object is a " + *type;
    }
    for (const char* index : {"os_index", "gp_index"}) {
      const std::string* v = e.attribute(index);
      if (v != nullptr && !parse_index(*v)) {
        return what + " has " + index + " \"" + v->substr(0, 20) + "\", not a small integer";
      }
    }
    for (int i = 0; i < 4; ++i) {
      const std::string* v = e.attribute(kSetNames[i]);
      if (v == nullptr) {
        if (*side == Side::kIo) continue;
        return what + " has no " + kSetNames[i] + " attribute";
      }
      auto b = parse_bitmap(*v, max_words());
      if (!b) {
        return what + " has " + kSetNames[i] + " \"" + v->substr(0, 40) +
               "\", not an hwloc bitmap such as 0x000000ff,0xffffffff";
      }
      o->sets[static_cast<size_t>(i)] = std::move(*b);
    }
    // The root's allowed sets: well formed and within the complete ones (a malformed one
    // leaves hwloc without a NUMA node, and it refuses the export).
    for (const auto& [name, complete] : {std::pair{"allowed_cpuset", 1}, {"allowed_nodeset", 3}}) {
      const std::string* v = e.attribute(name);
      if (v == nullptr) continue;
      auto b = parse_bitmap(*v, max_words());
      if (!b) {
        return what + " has " + name + " \"" + v->substr(0, 40) +
               "\", not an hwloc bitmap such as 0x000000ff,0xffffffff";
      }
      if (*side != Side::kIo && !b->within(o->sets[static_cast<size_t>(complete)])) {
        return what + "'s " + name + " is not within its " + kSetNames[complete];
      }
    }
    if (*side == Side::kIo) return "";
    if (parent.kind == Open::kObject && parent.side == Side::kIo) {
      return what + " sits inside an I/O or Misc object";
    }
    if (!o->sets[0].within(o->sets[1])) return what + "'s cpuset is not within its complete_cpuset";
    if (!o->sets[2].within(o->sets[3])) {
      return what + "'s nodeset is not within its complete_nodeset";
    }
    if (parent.kind == Open::kObject) {
      for (size_t i = 0; i < 4; ++i) {
        if (!o->sets[i].within(parent.sets[i])) {
          return what + "'s " + kSetNames[i] + " is not within its parent's";
        }
      }
    }
    if (*type == "PU" || *type == "NUMANode") {
      const std::string* v = e.attribute("os_index");
      if (v == nullptr) return what + " has no os_index attribute";
      const uint32_t index = *parse_index(*v);
      if (*type == "PU" && (!o->sets[1].test(index) || o->sets[1].count_up_to(2) != 1)) {
        return what + " P#" + *v + " has a complete_cpuset that is not exactly that PU";
      }
      if (*type == "NUMANode" && !o->sets[3].test(index)) {
        return what + " P#" + *v + " is not within its own complete_nodeset";
      }
    }
    return "";
  }

  XmlLimits limits_;
  std::vector<Open> stack_;
  int roots_ = 0;
};

}  // namespace

Status check_hwloc_xml(std::string_view xml, const std::string& path, const XmlLimits& limits) {
  const std::string head = "'" + path + "' is not a valid hwloc XML export: ";
  const std::string tail = "; export it again with `lstopo --of xml`";
  XmlScanner scanner(xml, limits);
  Checker checker(limits);
  XmlEvent e;
  while (scanner.next(&e)) {
    if (e.kind == XmlEvent::kEnd) {
      checker.end();
      continue;
    }
    if (std::string m = checker.start(e); !m.empty()) {
      return invalid_input(head + "line " + std::to_string(e.line) + ": " + m + tail);
    }
  }
  if (!scanner.status()) return invalid_input(head + scanner.status().error().message() + tail);
  if (!checker.has_root()) return invalid_input(head + "no root <object>" + tail);
  return ok_status();
}

}  // namespace dltune::topology
